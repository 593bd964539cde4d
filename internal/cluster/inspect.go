package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	"go.etcd.io/etcd/api/v3/mvccpb"
	clientv3 "go.etcd.io/etcd/client/v3"

	"github.com/tmux-amq/tamq/internal/errs"
)

// What the doctor asks of the cluster: is each member up, may we read,
// what lies under the prefix, and how far our clock is from etcd's hosts'.

// MemberStatus is what one endpoint says of itself.
type MemberStatus struct {
	Endpoint  string
	Version   string
	MemberID  uint64
	Leader    uint64 // 0: the member knows no leader
	IsLearner bool
	Errors    []string // alarms (e.g. NOSPACE)
}

// Status asks one endpoint for its status.
func (c *Claims) Status(ctx context.Context, endpoint string) (MemberStatus, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Status(cctx, endpoint)
	cancel()
	if err != nil {
		e := c.failed(ctx, err, "ask "+endpoint+" for its status")
		if errs.Is(e, errs.Unavailable) {
			return MemberStatus{}, errs.Wrap(errs.Unavailable, err, "cluster: etcd member %s does not answer", endpoint)
		}
		return MemberStatus{}, e
	}
	return MemberStatus{Endpoint: endpoint, Version: resp.Version, MemberID: resp.Header.GetMemberId(), Leader: resp.Leader,
		IsLearner: resp.IsLearner, Errors: resp.Errors}, nil
}

// CheckRead reads under the prefix once (a count), as every claim does:
// nil, or why it failed (errs.PermissionDeny when the credentials are
// refused or may not read there).
func (c *Claims) CheckRead(ctx context.Context) error {
	cctx, cancel := c.call(ctx)
	_, err := c.cli.Get(cctx, c.cfg.Prefix+"/", clientv3.WithPrefix(), clientv3.WithCountOnly())
	cancel()
	return c.failed(ctx, err, "read under "+c.cfg.Prefix)
}

// AuthEnabled says whether etcd checks who calls it: with auth off, the
// credentials are never asked for, and anyone who reaches etcd may take,
// drop or forge claims and plant checkpoints.
func (c *Claims) AuthEnabled(ctx context.Context) (bool, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.AuthStatus(cctx)
	cancel()
	if err != nil {
		return false, c.failed(ctx, err, "ask etcd whether its auth is on")
	}
	return resp.Enabled, nil
}

// HasCredentials says whether the store logs in (cluster.credential_command).
func (c *Claims) HasCredentials() bool { return c.secret }

// Inventory is what lies under the prefix.
type Inventory struct {
	// Claims are the live claims, ByHost their count per host; Settled
	// the claims of leases that ended (Settle), Checkpoints the tasks'
	// shared checkpoints.
	Claims, Settled, Checkpoints int
	ByHost                       map[string]int
	// Examples of each kind of key that is not what the engine writes, a
	// few each for the report, and the count of each:
	//   - Unleased: claims, records and checkpoints without an etcd lease
	//     (written by hand: they would never run out; the engine passes
	//     them over);
	//   - Forged: checkpoints whose value names another host or task than
	//     their key (the engine does not use them);
	//   - Malformed: claim keys whose value is no holder, or names another
	//     etcd lease than its key's (passed over too);
	//   - Old: keys of an older engine (<prefix>/checkpoints/,
	//     <prefix>/doctor/), never read now;
	//   - Foreign: keys that are not the engine's at all.
	Unleased, Forged, Malformed, Old, Foreign                          []string
	UnleasedCount, ForgedCount, MalformedCount, OldCount, ForeignCount int
}

// maxExamples bounds the keys an Inventory names.
const maxExamples = 5

func note(list *[]string, count *int, what string) {
	*count++
	if len(*list) < maxExamples {
		*list = append(*list, what)
	}
}

// Inventory reads every key under the prefix and sorts them out.
func (c *Claims) Inventory(ctx context.Context) (Inventory, error) {
	cctx, cancel := c.call(ctx)
	resp, err := c.cli.Get(cctx, c.cfg.Prefix+"/", clientv3.WithPrefix())
	cancel()
	if err != nil {
		return Inventory{}, c.failed(ctx, err, "list the keys under "+c.cfg.Prefix)
	}
	inv := Inventory{ByHost: map[string]int{}}
	p := c.cfg.Prefix
	for _, kv := range resp.Kvs {
		key := string(kv.Key)
		if host, task, ok := checkpointOfKey(p, key); ok {
			inv.Checkpoints++
			var cp shared
			switch {
			case kv.Lease == 0:
				note(&inv.Unleased, &inv.UnleasedCount, key)
			case json.Unmarshal(kv.Value, &cp) != nil || cp.HostID != host || cp.TaskID != task:
				note(&inv.Forged, &inv.ForgedCount, key)
			}
			continue
		}
		if rest, ok := strings.CutPrefix(key, p+hostsDir); ok && strings.HasSuffix(rest, doctorSub) && !strings.Contains(strings.TrimSuffix(rest, doctorSub), "/") {
			continue // a doctor's probe key, there for a moment
		}
		if id, ok := strings.CutPrefix(key, p+lastDir); ok {
			if kv.Lease == 0 {
				note(&inv.Unleased, &inv.UnleasedCount, key)
			}
			if strings.Contains(id, "/") {
				note(&inv.Foreign, &inv.ForeignCount, key)
			}
			continue
		}
		if strings.HasPrefix(key, p+oldCheckpointsDir) || strings.HasPrefix(key, p+oldDoctorDir) {
			note(&inv.Old, &inv.OldCount, key)
			continue
		}
		id, ok := taskOfKey(p, key)
		if !ok {
			note(&inv.Foreign, &inv.ForeignCount, key)
			continue
		}
		f := classify([]*mvccpb.KeyValue{kv})
		switch {
		case kv.Lease == 0:
			note(&inv.Unleased, &inv.UnleasedCount, key)
			continue
		case f.stray != "":
			note(&inv.Malformed, &inv.MalformedCount, id)
			continue
		case f.h.Settled != "":
			inv.Settled++
			continue
		}
		inv.Claims++
		inv.ByHost[f.h.HostID]++
	}
	return inv, nil
}

// Hosts are the hosts holding claims, in order.
func (inv Inventory) Hosts() []string {
	hosts := make([]string, 0, len(inv.ByHost))
	for h := range inv.ByHost {
		hosts = append(hosts, h)
	}
	slices.Sort(hosts)
	return hosts
}

// Skew is how far an etcd member's clock is ahead of ours (negative:
// behind), measured to within Error.
type Skew struct {
	Offset, Error time.Duration
}

// The bounds of a skew measurement.
const (
	skewWindow = 1500 * time.Millisecond // a second's tick must fall in it
	skewGap    = 20 * time.Millisecond   // between two requests
)

// MeasureSkew compares our clock with the clock of the host of one etcd
// member. etcd does not tell its time over its API, but its client port
// also answers plain HTTP (/version), and Go's HTTP server dates every
// answer (the Date header) by its host's clock, to the second. One answer
// places that clock only within a second; so requests are repeated, a few
// milliseconds apart, until the Date turns to the next second: that
// instant of the member's clock (a whole second) then lies between the
// start of the last request that read the old second and the end of the
// first that read the new one, by our clock. The measure is as good as the
// gap and two round trips, a few tens of milliseconds; it takes at most
// a second and a half.
//
// The etcd leases themselves do not depend on the hosts' clocks (the
// leader counts their TTLs by its own monotonic clock). What does is what
// the hosts compare with each other: the ClaimedAt of a claim, the
// deadlines of the engine's leases, and the times in their receipts.
func (c *Claims) MeasureSkew(ctx context.Context, endpoint string) (Skew, error) {
	ctx, cancel := context.WithTimeout(ctx, skewWindow+c.timeout)
	defer cancel()
	// Through the checked dialer: a squatter on the port gets no request.
	client, url, err := c.httpClient(endpoint, "/version")
	if err != nil {
		return Skew{}, err
	}
	defer client.CloseIdleConnections()
	first, err := dated(ctx, client, url)
	if err != nil {
		return Skew{}, err
	}
	prev := first
	deadline := time.Now().Add(skewWindow)
	for time.Now().Before(deadline) {
		select {
		case <-ctx.Done():
			return Skew{}, errs.Wrap(errs.Unavailable, ctx.Err(), "cluster: measure the clock of %s", endpoint)
		case <-time.After(skewGap):
		}
		s, err := dated(ctx, client, url)
		if err != nil {
			return Skew{}, err
		}
		if s.date.After(prev.date) {
			// The member's clock read s.date (a whole second) at one
			// instant between prev.sent and s.got by ours.
			mid := prev.sent.Add(s.got.Sub(prev.sent) / 2)
			return Skew{Offset: s.date.Sub(mid), Error: s.got.Sub(prev.sent) / 2}, nil
		}
		prev = s
	}
	// No tick seen (slow answers): one answer bounds it within a second.
	// The member's clock read between date and date+1s while we waited.
	mid := first.sent.Add(first.got.Sub(first.sent) / 2)
	return Skew{Offset: first.date.Add(time.Second / 2).Sub(mid), Error: time.Second/2 + first.got.Sub(first.sent)/2}, nil
}

// sample is one dated answer: when we sent it and got it, by our clock
// (monotonic readings), and the Date it bore.
type sample struct{ sent, got, date time.Time }

func dated(ctx context.Context, client *http.Client, url string) (sample, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return sample{}, errs.Wrap(errs.ConfigInvalid, err, "cluster: %s", url)
	}
	sent := time.Now()
	resp, err := client.Do(req)
	got := time.Now()
	if err != nil {
		return sample{}, errs.Wrap(errs.Unavailable, err, "cluster: GET %s", url)
	}
	resp.Body.Close()
	date, err := http.ParseTime(resp.Header.Get("Date"))
	if err != nil {
		return sample{}, errs.New(errs.Unsupported, "cluster: %s answered without a Date header (%s)", url, resp.Status)
	}
	return sample{sent: sent, got: got, date: date}, nil
}

// ProbeWrite writes and deletes the doctor's key of this host, so that a
// check knows writes under the prefix are allowed too.
func (c *Claims) ProbeWrite(ctx context.Context) error {
	key := doctorKey(c.cfg.Prefix, c.cfg.HostID)
	cctx, cancel := c.call(ctx)
	defer cancel()
	if _, err := c.cli.Put(cctx, key, fmt.Sprintf(`{"host_id":%q,"at":%q}`, c.cfg.HostID, time.Now().UTC().Format(time.RFC3339))); err != nil {
		return c.failed(ctx, err, "write "+key)
	}
	_, err := c.cli.Delete(cctx, key)
	return c.failed(ctx, err, "delete "+key)
}
