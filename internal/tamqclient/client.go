// Package tamqclient is the one way into tamq's service: a typed method per
// operation, each with a timeout that suits it, used by every tamq command,
// the broker and coordination-engine. A service that is not running is an
// `unavailable` error that says how to start it. The one exception is the
// broker's stream, which the broker opens (broker.OpenSession): it runs on
// Go's network poller, which this package, linked into `tamq send`, does
// without.
package tamqclient

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// How long each kind of call may take, dial included. Quick questions are
// bounded tightly so a hung service is reported soon; calls that write to
// the database or open windows may wait on a busy service.
const (
	look    = 10 * time.Second // status, endpoints, forget
	write   = 30 * time.Second // send, ack, retry, register, replay chunks
	restore = 2 * time.Minute  // restore reopens every window
	purge   = time.Hour        // a purge deletes and gives space back in short steps, a large history for minutes
)

// Client calls the tamq service of one set of paths.
type Client struct {
	daemon.BaseClient
}

// New returns the client of the service at p.
func New(p paths.Paths) *Client { return &Client{daemon.BaseClient{Paths: p}} }

// Status returns the service's status report.
func (c *Client) Status(ctx context.Context) (api.StatusReport, error) {
	return daemon.Call[api.StatusReport](ctx, c.BaseClient, look, api.OpStatus, nil)
}

// Send queues one "To:<repo>: body" line; the sender is the caller's window,
// as the service finds it.
func (c *Client) Send(ctx context.Context, args api.SendArgs) (api.Message, error) {
	return daemon.Call[api.Message](ctx, c.BaseClient, write, api.OpSend, args)
}

// Ack acknowledges a delivered message.
func (c *Client) Ack(ctx context.Context, id string) (api.Message, error) {
	return c.byID(ctx, api.OpAck, id)
}

// Retry queues a failed or expired message again, with the same id.
func (c *Client) Retry(ctx context.Context, id string) (api.Message, error) {
	return c.byID(ctx, api.OpRetry, id)
}

// Cancel drops a queued message: it ends cancelled and is never written.
func (c *Client) Cancel(ctx context.Context, id string) (api.Message, error) {
	return c.byID(ctx, api.OpCancel, id)
}

func (c *Client) byID(ctx context.Context, op, id string) (api.Message, error) {
	return daemon.Call[api.Message](ctx, c.BaseClient, write, op, api.IDArgs{ID: id})
}

// Register records an endpoint and the windows opened on it.
func (c *Client) Register(ctx context.Context, ep api.Endpoint) error {
	return c.Call(ctx, write, api.OpRegister, api.RegisterArgs{Endpoint: ep}, nil)
}

// Endpoints lists the endpoints, the forgotten ones too with all.
func (c *Client) Endpoints(ctx context.Context, all bool) (api.EndpointsResult, error) {
	return daemon.Call[api.EndpointsResult](ctx, c.BaseClient, look, api.OpEndpoints, api.EndpointsArgs{All: all})
}

// Forget forgets an endpoint whose tmux server is gone for good.
func (c *Client) Forget(ctx context.Context, id string) (api.ForgetResult, error) {
	return daemon.Call[api.ForgetResult](ctx, c.BaseClient, look, api.OpForget, api.IDArgs{ID: id})
}

// Restore reopens the recorded windows through the running service;
// recreate names tmux sockets whose windows come back even if their server
// is gone.
func (c *Client) Restore(ctx context.Context, recreate []string) (api.RestoreResult, error) {
	return daemon.Call[api.RestoreResult](ctx, c.BaseClient, restore, api.OpRestore, api.RestoreArgs{Recreate: recreate})
}

// Replay sends one chunk of a replay run.
func (c *Client) Replay(ctx context.Context, args api.ReplayArgs) (api.ReplayResult, error) {
	return daemon.Call[api.ReplayResult](ctx, c.BaseClient, write, api.OpReplay, args)
}

// Purge plans a purge of the history, and carries it out unless args.DryRun.
func (c *Client) Purge(ctx context.Context, args api.PurgeArgs) (api.PurgeResult, error) {
	return daemon.Call[api.PurgeResult](ctx, c.BaseClient, purge, api.OpPurge, args)
}

// Wake asks tamq to queue a continuation prompt for a repo's agent
// (coordination-engine's only way into a terminal).
func (c *Client) Wake(ctx context.Context, req api.WakeRequest) (api.WakeAck, error) {
	return daemon.Call[api.WakeAck](ctx, c.BaseClient, write, api.OpWake, req)
}

// CancelWake cancels the unwritten wakes of a lease's attempts up to
// attempt (0: all).
func (c *Client) CancelWake(ctx context.Context, args api.CancelWakeArgs) (api.CancelWakeResult, error) {
	return daemon.Call[api.CancelWakeResult](ctx, c.BaseClient, write, api.OpCancelWake, args)
}

// WakeHeld asks whether the wake of a lease's attempt was ever written,
// and what holds it if not.
func (c *Client) WakeHeld(ctx context.Context, args api.WakeHeldArgs) (api.WakeHeldResult, error) {
	return daemon.Call[api.WakeHeldResult](ctx, c.BaseClient, look, api.OpWakeHeld, args)
}

// DeliveryCurrent asks whether the messages of a delivery are still being
// delivered (a broker's last look before the first byte).
func (c *Client) DeliveryCurrent(ctx context.Context, ids []string) (api.DeliveryCurrentResult, error) {
	return daemon.Call[api.DeliveryCurrentResult](ctx, c.BaseClient, look, api.OpDeliveryCurrent, api.DeliveryCurrentArgs{IDs: ids})
}

// Whois says which of tamq's windows the process pid runs in ("" for none).
func (c *Client) Whois(ctx context.Context, pid int32) (api.WhoisResult, error) {
	return daemon.Call[api.WhoisResult](ctx, c.BaseClient, 2*time.Second, api.OpWhois, api.WhoisArgs{PID: pid})
}
