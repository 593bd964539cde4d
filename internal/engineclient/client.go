// Package engineclient is the one way into coordination-engine's service: a typed
// method per operation, each with a timeout that suits it, used by the
// engine's commands, the agent commands and tamq's service (attach). A
// service that is not running is an `unavailable` error that says how to
// start it.
package engineclient

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/paths"
)

// How long each kind of call may take, dial included.
const (
	quick = 5 * time.Second  // ping, hello, stop, lease ack/renew/release, checkpoint
	look  = 10 * time.Second // status, leases, receipts, attach
	wake  = 30 * time.Second // a manual wake waits for tamq's answer
	// publish waits while the engine posts to State Hub (10 s at most, and
	// the credential command when it needs a token); so do the calls the
	// engine relays to State Hub for an agent.
	publish = 45 * time.Second
	relay   = publish
)

// Client calls the coordination-engine service of one set of paths. It has
// one method per operation of engineapi, each with the timeout that suits
// it: many methods, but each a thin, typed call, so splitting them into
// groups would only spread the protocol across types.
type Client struct {
	daemon.BaseClient
}

// New returns the client of the engine at p (coordination-engine's paths).
func New(p paths.Paths) *Client { return &Client{daemon.BaseClient{Paths: p}} }

// RestartWait is how long an agent's command waits for an engine that is
// being restarted: a lease release or task status typed while the engine
// restarts then lands instead of failing in the agent's hands.
const RestartWait = 10 * time.Second

// ForAgent returns the client of the engine at p for the commands an agent
// runs, which wait RestartWait for an engine that is not listening.
func ForAgent(p paths.Paths) *Client {
	return &Client{daemon.BaseClient{Paths: p, WaitRestart: RestartWait}}
}

// Status returns the engine's status report.
func (c *Client) Status(ctx context.Context) (api.StatusReport, error) {
	return daemon.Call[api.StatusReport](ctx, c.BaseClient, look, api.OpStatus, nil)
}

// Attach hands over one tamq endpoint and its windows; the engine answers
// the endpoint's coordination endpoint id.
func (c *Client) Attach(ctx context.Context, args api.AttachArgs) (api.AttachResult, error) {
	return daemon.Call[api.AttachResult](ctx, c.BaseClient, look, api.OpAttach, args)
}

// Detach says a tamq endpoint stops taking wakes.
func (c *Client) Detach(ctx context.Context, args api.DetachArgs) error {
	return c.Call(ctx, quick, api.OpDetach, args, nil)
}

// Wake is the operator's manual trigger.
func (c *Client) Wake(ctx context.Context, args api.WakeArgs) (api.WakeResult, error) {
	return daemon.Call[api.WakeResult](ctx, c.BaseClient, wake, api.OpWake, args)
}

// Ack acknowledges a lease: the agent begins the work.
func (c *Client) Ack(ctx context.Context, args api.LeaseArgs) (api.Lease, error) {
	return c.lease(ctx, api.OpLeaseAck, args)
}

// Renew extends a lease while the agent works.
func (c *Client) Renew(ctx context.Context, args api.LeaseArgs) (api.Lease, error) {
	return c.lease(ctx, api.OpLeaseRenew, args)
}

// LeaseCurrent asks whether an attempt of a lease is still the one to work
// on (tamq asks before it writes a wake).
func (c *Client) LeaseCurrent(ctx context.Context, args api.LeaseArgs) (api.LeaseCurrentResult, error) {
	return daemon.Call[api.LeaseCurrentResult](ctx, c.BaseClient, quick, api.OpLeaseCurrent, args)
}

// Release ends a lease with a result.
func (c *Client) Release(ctx context.Context, args api.ReleaseArgs) (api.Lease, error) {
	return c.lease(ctx, api.OpRelease, args)
}

// Checkpoint records a checkpoint on a lease.
func (c *Client) Checkpoint(ctx context.Context, args api.CheckpointArgs) (api.Lease, error) {
	return c.lease(ctx, api.OpCheckpoint, args)
}

func (c *Client) lease(ctx context.Context, op string, args any) (api.Lease, error) {
	return daemon.Call[api.Lease](ctx, c.BaseClient, quick, op, args)
}

// Leases lists leases, newest first, page by page: the engine cuts an
// answer to fit one protocol frame.
func (c *Client) Leases(ctx context.Context, args api.LeasesArgs) (api.LeasesResult, error) {
	var err error
	out := api.LeasesResult{}
	out.Leases, err = api.Gather(args.Offset, args.Limit, func(offset, limit int) ([]api.Lease, bool, error) {
		args.Offset, args.Limit = offset, limit
		var res api.LeasesResult
		err := c.Call(ctx, look, api.OpLeases, args, &res)
		return res.Leases, res.More, err
	})
	return out, err
}

// Receipts lists receipts, oldest first (the latest Limit), page by page.
func (c *Client) Receipts(ctx context.Context, args api.ReceiptsArgs) (api.ReceiptsResult, error) {
	var err error
	out := api.ReceiptsResult{}
	out.Receipts, err = api.GatherOlder(args.BeforeID, args.Limit, func(r api.Receipt) int64 { return r.ID },
		func(before int64, limit int) ([]api.Receipt, bool, error) {
			args.BeforeID, args.Limit = before, limit
			var res api.ReceiptsResult
			err := c.Call(ctx, look, api.OpReceipts, args, &res)
			return res.Receipts, res.More, err
		})
	return out, err
}

// Explain tells why a task was or was not woken.
func (c *Client) Explain(ctx context.Context, task string) (api.ExplainResult, error) {
	return daemon.Call[api.ExplainResult](ctx, c.BaseClient, look, api.OpExplain, api.ExplainArgs{Task: task})
}

// Publish hands tamq's receipts to the engine, which posts them to State
// Hub; State Hub's errors come back with their codes (unavailable,
// permission_denied), so tamq keeps the receipts pending.
func (c *Client) Publish(ctx context.Context, args api.PublishArgs) (api.PublishResult, error) {
	return daemon.Call[api.PublishResult](ctx, c.BaseClient, publish, api.OpPublish, args)
}

// MessageShow reads a State Hub message with its body, which the engine
// fetches for the asking agent and never keeps. A body larger than one
// protocol frame comes in pieces, joined here; a message that changes
// between pieces is a conflict (ask again). A body the engine's secret
// scan withholds comes back with Withheld and no body.
func (c *Client) MessageShow(ctx context.Context, id string) (api.MessageShowResult, error) {
	return pieces(ctx, c, api.OpMessageShow,
		func(at api.PieceArgs) any { return api.MessageShowArgs{MessageID: id, PieceArgs: at} },
		func(r *api.MessageShowResult) (*api.Piece, string) { return &r.Piece, r.Message.Revision })
}

// MessageRead marks a State Hub message read, for the agent that read it.
func (c *Client) MessageRead(ctx context.Context, id string) (api.MessageReadResult, error) {
	return daemon.Call[api.MessageReadResult](ctx, c.BaseClient, relay, api.OpMessageRead, api.MessageReadArgs{MessageID: id})
}

// TaskShow reads a task with its description, which the engine fetches
// for the asking agent and never keeps, in pieces as MessageShow.
func (c *Client) TaskShow(ctx context.Context, id string) (api.TaskShowResult, error) {
	return pieces(ctx, c, api.OpTaskShow,
		func(at api.PieceArgs) any { return api.TaskShowArgs{TaskID: id, PieceArgs: at} },
		func(r *api.TaskShowResult) (*api.Piece, string) { return &r.Piece, r.Task.Revision })
}

// pieces asks op for a text the tracker holds, piece by piece (args makes
// the request of each), and joins the pieces into the first answer; of
// each answer, piece is its piece and the revision the next must match.
// A withheld text comes back as answered, without a piece.
func pieces[R any](ctx context.Context, c *Client, op string, args func(api.PieceArgs) any, piece func(*R) (*api.Piece, string)) (R, error) {
	var first, zero R
	at := api.PieceArgs{}
	for {
		var res R
		if err := c.Call(ctx, relay, op, args(at), &res); err != nil {
			return zero, err
		}
		p, revision := piece(&res)
		if p.Withheld != nil {
			p.Body, p.Offset, p.Next = "", 0, 0
			return res, nil
		}
		if at.Offset == 0 {
			first = res
		} else {
			whole, _ := piece(&first)
			whole.Body += p.Body
		}
		if p.Next <= at.Offset {
			whole, _ := piece(&first)
			whole.Offset, whole.Next = 0, 0
			return first, nil
		}
		at.Offset, at.Revision = p.Next, revision
	}
}

// TaskSet states a task's status in State Hub for the agent that works on
// it.
func (c *Client) TaskSet(ctx context.Context, args api.TaskSetArgs) (api.TaskSetResult, error) {
	return daemon.Call[api.TaskSetResult](ctx, c.BaseClient, relay, api.OpTaskSet, args)
}

// Purge deletes (or, in a dry run, counts) the history older than a cutoff.
func (c *Client) Purge(ctx context.Context, args api.PurgeArgs) (api.PurgeResult, error) {
	return daemon.Call[api.PurgeResult](ctx, c.BaseClient, look, api.OpPurge, args)
}
