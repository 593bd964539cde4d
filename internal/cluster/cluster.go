// Package cluster is the adapter over etcd that lets several hosts watch one
// State Hub with one live claim per task across them: before a host's engine
// offers a lease for a task, it claims the task here; the claim is a key
// under the configured prefix that only one host can create, attached to an
// etcd lease that runs out (and deletes the key) when its host stops
// renewing it. It is the only package that speaks to etcd; the domain
// (internal/lease) knows nothing of it.
//
// Everything a claim needs after a restart is in etcd (the holder, its etcd
// lease id), so a Claims keeps no state but its connection. Every call is
// bounded by the dial timeout (or the caller's shorter deadline); an etcd
// that does not answer is errs.Unavailable naming the endpoints, refused
// credentials errs.PermissionDeny. The password is kept in memory only and
// never logged: the etcd client logs nothing (zap.NewNop) and our errors
// never carry it.
//
// The password goes only to an endpoint that proves itself, checked on
// every connection the client makes (dial.go): a loopback port must be
// held by the user or root, a socket too (and the process behind it), and
// another machine is reached over TLS when there is a password to send.
package cluster

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"time"

	"go.etcd.io/etcd/api/v3/v3rpc/rpctypes"
	clientv3 "go.etcd.io/etcd/client/v3"
	"go.uber.org/zap"
	"google.golang.org/grpc"
	gbackoff "google.golang.org/grpc/backoff"
	"google.golang.org/grpc/codes"
	"google.golang.org/grpc/status"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/sockowner"
)

// Config is what Open needs: the [cluster] section and the engine's id.
type Config struct {
	Endpoints []string
	// HostID and EngineID name this host and engine in the claims it takes
	// (when the Holder passed to Claim leaves them empty).
	HostID, EngineID string
	Prefix           string
	// TLS files (absolute paths; empty: none). https endpoints without
	// a CA file trust the system's roots.
	TLSCAFile, TLSCertFile, TLSKeyFile string
	// CredentialCommand prints "user:password" for etcd's auth; empty: no auth.
	CredentialCommand []string
	// DialTimeout bounds connecting and each call (0: 5 s).
	DialTimeout time.Duration
	// Now is the clock of the times in the claims (nil: time.Now); a test
	// moves it on to pass SettledGrace.
	Now func() time.Time
	// OwnerOf stands in for the system's word on who owns a socket (tests
	// only; see sockowner.OwnerFunc).
	OwnerOf sockowner.OwnerFunc
}

// ConfigFrom builds a Config from a validated [cluster] section.
func ConfigFrom(c config.Cluster, engineID string) Config {
	return Config{
		Endpoints: c.EtcdEndpoints, HostID: c.HostID, EngineID: engineID, Prefix: c.Prefix,
		TLSCAFile: c.TLSCAFile, TLSCertFile: c.TLSCertFile, TLSKeyFile: c.TLSKeyFile,
		CredentialCommand: c.CredentialCommand, DialTimeout: c.DialTimeout(),
	}
}

// Holder is who holds a task's claim; it is the claim key's value (JSON).
// EtcdLease is the etcd lease the key is attached to, kept in the value so
// that Renew and Release find it after the engine restarts. A key whose
// value does not name the etcd lease it is attached to is no claim (get).
type Holder struct {
	HostID    string    `json:"host_id"`
	EngineID  string    `json:"engine_id"`
	LeaseID   string    `json:"lease_id"`
	Attempt   int       `json:"attempt"`
	ClaimedAt time.Time `json:"claimed_at"`
	EtcdLease int64     `json:"etcd_lease"`
	// Repo is the repo the work is for: a checkpoint shared under the
	// claim is believed for that repo only.
	Repo string `json:"repo,omitempty"`
	// RecordLease is the etcd lease the claim's shared checkpoint and its
	// record are attached to (0 until the first is shared): its TTL is the
	// claim's and SettledGrace more, and it is kept alive with the claim,
	// so the host that takes the work over after the claim lapses can
	// still read them. See checkpoints.go.
	RecordLease int64 `json:"record_lease,omitempty"`
	// Previous is the last claim of the work that shared a checkpoint, as
	// etcd held it when this claim was taken: the only claim whose
	// checkpoint this one may resume from.
	Previous Previous `json:"previous,omitzero"`
	// Revision is the revision of the work the claim was taken for (State
	// Hub's revision of the task).
	Revision string `json:"revision,omitempty"`
	// Settled is how the holder's lease ended ("" while it is live), and
	// SettledAt when: the work at Revision is settled, and no host takes
	// it again until State Hub says otherwise (a new revision). See Settle.
	Settled   string    `json:"settled,omitempty"`
	SettledAt time.Time `json:"settled_at,omitzero"`

	// Replaced is what Claim found in the claim's place and passed over,
	// as no claim (a key without an etcd lease, written by hand): "" when
	// nothing. Never stored; the caller reports it.
	Replaced string `json:"-"`
}

// Previous is the record of an earlier claim of the work (keys.go,
// lastDir), as a later claim keeps it.
type Previous struct {
	HostID      string `json:"host_id,omitempty"`
	LeaseID     string `json:"lease_id,omitempty"`
	Repo        string `json:"repo,omitempty"`
	RecordLease int64  `json:"record_lease,omitempty"`
	// KeyLease is the etcd lease the record's key was attached to when it
	// was read (0: none, a record written by hand).
	KeyLease int64 `json:"key_lease,omitempty"`
	// Unreadable: the record was no claim's.
	Unreadable bool `json:"unreadable,omitempty"`
}

// Claims is the claim store over one etcd cluster.
type Claims struct {
	cli       *clientv3.Client
	cfg       Config
	timeout   time.Duration
	endpoints string // for messages: "http://a:2379, http://b:2379"
	// tls: the connections speak TLS; secret: there is a password to send.
	tls, secret bool
	// refused is the last refusal of the dialer (dial.go), nil once a
	// connection passed its checks again: a call that fails for want of
	// a connection says why there was none.
	refused atomic.Pointer[errs.Error]
}

const defaultTimeout = 5 * time.Second

// reconnect paces the tries to connect again to an etcd that went away.
var reconnect = gbackoff.Config{BaseDelay: 100 * time.Millisecond, Multiplier: 1.6, Jitter: 0.2, MaxDelay: time.Second}

// Open connects to etcd. Without credentials it does not wait for etcd
// (the first call says whether it answers); with them it authenticates
// once, so a refused password or an unreachable etcd fails here. The
// credential command runs once, here.
func Open(ctx context.Context, cfg Config) (*Claims, error) {
	if len(cfg.Endpoints) == 0 {
		return nil, errs.New(errs.ConfigInvalid, "cluster: no etcd endpoints (cluster.etcd_endpoints is empty)")
	}
	if cfg.Prefix == "" {
		cfg.Prefix = config.DefaultClusterPrefix
	}
	// What config validation checks, again for callers that build a
	// Config by hand: a claim without a host cannot be told apart, and a
	// prefix must be a key path for the keys to stay under it.
	if cfg.HostID == "" {
		return nil, errs.New(errs.ConfigInvalid, "cluster: no host id (cluster.host_id)")
	}
	if !strings.HasPrefix(cfg.Prefix, "/") || strings.HasSuffix(cfg.Prefix, "/") {
		return nil, errs.New(errs.ConfigInvalid, "cluster: prefix %q must start with / and not end with /", cfg.Prefix)
	}
	if cfg.Now == nil {
		cfg.Now = time.Now
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = defaultTimeout
	}
	if err := checkEndpoints(cfg.Endpoints); err != nil {
		return nil, err
	}
	c := &Claims{cfg: cfg, timeout: cfg.DialTimeout, endpoints: strings.Join(cfg.Endpoints, ", "), secret: len(cfg.CredentialCommand) > 0}
	tlsCfg, err := tlsConfig(cfg)
	if err != nil {
		return nil, err
	}
	c.tls = tlsCfg != nil
	cc := clientv3.Config{
		Endpoints: cfg.Endpoints, DialTimeout: cfg.DialTimeout, TLS: tlsCfg, Context: context.WithoutCancel(ctx),
		// The client's own logs would go to stderr beside the engine's
		// log; our errors say what failed.
		Logger: zap.NewNop(),
		// A broken connection is noticed within seconds, not at the
		// next call's timeout.
		DialKeepAliveTime: 10 * time.Second, DialKeepAliveTimeout: cfg.DialTimeout,
		// Every connection, the first and each one after etcd was away,
		// goes through the checks of whom it reaches before gRPC (and the
		// password) writes a byte to it.
		DialOptions: []grpc.DialOption{grpc.WithContextDialer(c.dial),
			// Once etcd is back, the connection comes back within a
			// second, not after gRPC's backoff grew for as long as etcd
			// was away (its default reaches 6 s after 9 s of failures,
			// and 2 minutes in the end): a host renews the claims of the
			// work its agents are on before another may claim it.
			grpc.WithConnectParams(grpc.ConnectParams{Backoff: reconnect, MinConnectTimeout: cfg.DialTimeout})},
	}
	if len(cfg.CredentialCommand) > 0 {
		cctx, cancel := context.WithTimeout(ctx, credentialTimeout)
		user, password, err := Credentials(cctx, cfg.CredentialCommand)
		cancel()
		if err != nil {
			return nil, err
		}
		cc.Username, cc.Password = user, password
	}
	cli, err := clientv3.New(cc)
	if err != nil {
		return nil, c.failed(ctx, err, "connect to etcd")
	}
	c.cli = cli
	return c, nil
}

// Close ends the connection. Claims stay in etcd until released or run out.
func (c *Claims) Close() error { return c.cli.Close() }

// Endpoints are the etcd endpoints the store was opened with.
func (c *Claims) Endpoints() []string { return c.cfg.Endpoints }

// Prefix is where the store's keys are.
func (c *Claims) Prefix() string { return c.cfg.Prefix }

// call bounds one etcd call: the caller's deadline or the dial timeout,
// whichever comes first. Without it a call to an etcd that is down waits
// for ever (the client waits for a connection).
func (c *Claims) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, c.timeout)
}

// failed maps an etcd client error to an errs code: no answer in time (or
// no leader, no connection) is Unavailable, refused credentials or
// permissions PermissionDeny, anything else Internal. op says what was being
// done; ctx is the caller's, whose cancellation (a shutdown) is said as
// such, not as an etcd away. The error never holds the password: etcd's
// messages do not carry it.
func (c *Claims) failed(ctx context.Context, err error, op string) error {
	if err == nil {
		return nil
	}
	var e *errs.Error
	if errors.As(err, &e) {
		return err
	}
	switch {
	case errors.Is(ctx.Err(), context.Canceled):
		return errs.Wrap(errs.Unavailable, ctx.Err(), "cluster: %s: cancelled", op)
	case isUnavailable(err) && c.refused.Load() != nil:
		// There was no connection because the dialer refused the
		// endpoint: that is the news, not that etcd is away.
		r := c.refused.Load()
		return errs.Wrap(r.Code, r, "cluster: %s", op).WithHint("%s", r.Hint)
	case isAuthError(err):
		return errs.Wrap(errs.PermissionDeny, err, "cluster: %s: etcd refused the credentials", op).
			WithHint("check cluster.credential_command: it must print user:password of an etcd user allowed to read and write under %s", c.cfg.Prefix)
	case isUnavailable(err):
		return errs.Wrap(errs.Unavailable, err, "cluster: %s: etcd at %s is not reachable", op, c.endpoints).
			WithHint("start etcd, or fix cluster.etcd_endpoints; `coordination-engine doctor` checks each endpoint")
	}
	return errs.Wrap(errs.Internal, err, "cluster: %s", op)
}

func isAuthError(err error) bool {
	for _, target := range []error{rpctypes.ErrAuthFailed, rpctypes.ErrPermissionDenied, rpctypes.ErrInvalidAuthToken,
		rpctypes.ErrUserEmpty, rpctypes.ErrUserNotFound, rpctypes.ErrAuthOldRevision} {
		if errors.Is(err, target) {
			return true
		}
	}
	code := grpcCode(err)
	return code == codes.Unauthenticated || code == codes.PermissionDenied
}

func isUnavailable(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) || errors.Is(err, clientv3.ErrNoAvailableEndpoints) {
		return true
	}
	switch grpcCode(err) {
	case codes.Unavailable, codes.DeadlineExceeded, codes.Canceled:
		return true
	}
	return false
}

// grpcCode is the gRPC code of an etcd error (etcd's own or the transport's).
func grpcCode(err error) codes.Code {
	var ee rpctypes.EtcdError
	if errors.As(err, &ee) {
		return ee.Code()
	}
	if s, ok := status.FromError(err); ok {
		return s.Code()
	}
	return codes.Unknown
}

// describe is a holder as a person reads it, for messages.
func (h Holder) describe() string {
	return fmt.Sprintf("host %s (engine %s, lease %s, attempt %d)", h.HostID, h.EngineID, h.LeaseID, h.Attempt)
}
