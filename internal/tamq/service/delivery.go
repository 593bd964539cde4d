package service

import (
	"context"
	"errors"
	"log/slog"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	engineapi "github.com/tmux-amq/tamq/internal/engineapi"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// deliverer writes one claimed delivery into its window (through its broker
// or through tmux, Writer) and records what came of it: written, held,
// deferred until the window can take it, or failed. The dispatcher runs one
// per window at a time; a wake is confirmed with coordination-engine first,
// and one written through a broker is handed to the lease keeper.
type deliverer struct {
	log        *slog.Logger
	clock      clock.Clock
	config     *config.Loaded
	deliveries *store.Deliveries
	endpoints  windowFinder
	writer     Writer
	engine     *engineclient.Client
	// waitReason says why a window cannot take text now ("" when it can).
	waitReason func(key string) string
	// waits are told why a window waits, and asked to look at it again.
	waits   windowWaits
	brokers brokerLookup
	// leaseWritten hands a wake written through a broker to the lease
	// keeper (keeper.written).
	leaseWritten func(key, repo, leaseID string, attempt int, via *brokerConn, after uint64, held bool)
	// dispatch wakes the dispatcher when a held window is free again.
	dispatch wakeup.Signal
}

// windowFinder finds the recorded window of a repo on an endpoint.
type windowFinder interface {
	windowOf(ctx context.Context, endpointID, repo string) (queue.Endpoint, queue.Window, error)
}

// brokerLookup finds the live broker session of a window by its delivery
// key (nil: none).
type brokerLookup interface {
	get(key string) *brokerConn
}

// windowWaits records why a window cannot take deliveries (the watcher) and
// has its panes listed again.
type windowWaits interface {
	setWait(src waitSource, endpointID, repo, reason string)
	requestList(endpointIDs ...string)
}

// deliver writes the claimed messages of one window (one message, or a
// batch: queue.BatchText, one paste and one Enter) and records the outcome
// for each message as if it had been delivered alone: the same injected_at,
// each with its own receipt and attempt count.
func (s *deliverer) deliver(ctx context.Context, ms []queue.Message) {
	m := ms[0] // all are for its endpoint and target
	if !s.wakeStillCurrent(ctx, m) {
		return
	}
	ep, w, err := s.endpoints.windowOf(ctx, m.EndpointID, m.Target)
	var wr Written
	if err == nil {
		wctx, cancel := context.WithTimeout(withClaim(ctx, ms), DeliveryLease/2)
		wr = s.writer.Write(wctx, ep, w, queue.BatchText(ms), s.confirmOf(ctx, ms))
		cancel()
	} else {
		wr = Written{Outcome: api.DeliveryOutcome{Kind: api.Unreachable, Reason: err.Error()}}
	}
	s.record(ctx, ms, wr, nil)
}

// record records what came of writing ms (the writer's report): written,
// held, deferred until the window can take it, or failed. extra goes into
// the receipt of a delivery written or held.
func (s *deliverer) record(ctx context.Context, ms []queue.Message, wr Written, extra map[string]any) {
	t := timing(s.config)
	m := ms[0]
	out := wr.Outcome
	if out.Kind == api.Cancelled {
		// Cancelled while the writer waited for the window: the messages
		// say so already; nothing was written.
		s.log.Info("delivery not written: cancelled meanwhile", "message", m.ID, "reason", out.Reason)
		return
	}
	if out.Deferred() {
		s.deferDelivery(ctx, ms, wr)
		return
	}
	// One time for the whole delivery: its messages come back due together
	// and go in together again.
	now := s.clock.Now()
	switch out.Kind {
	case api.EnterHeld:
		// The text sits in the agent's input box: nothing more is typed.
		reason := "Enter held (" + out.Held + "): " + out.Reason
		s.log.Warn("delivery held", "message", m.ID, "messages", len(ms), "target", m.Target, "held", out.Held, "reason", out.Reason)
		s.transitionEach(ctx, ms, reason, withExtra(map[string]any{"held": out.Held}, extra), func(x *queue.Message) error {
			return x.HeldBack(now, reason)
		})
		s.keepWake(m, wr) // a person may press the Enter: the agent then takes it
		return
	case api.Failed:
		why := "the write failed" // a writer that gave no error must not stop the service
		if out.Err != nil {
			why = out.Err.Error()
		}
		s.log.Warn("delivery failed", "message", m.ID, "messages", len(ms), "target", m.Target, "maybe_written", out.MaybeWritten, "error", why)
		s.transitionEach(ctx, ms, "write failed", nil, func(x *queue.Message) error {
			return x.WriteFailed(now, t, out.MaybeWritten, why)
		})
		return
	}
	// injected means written: the time is the writer's report of the write.
	at := out.At
	if at.IsZero() {
		at = now
	}
	detail := withExtra(wr.detail(), extra)
	if len(ms) > 1 {
		detail["batch_size"] = len(ms) // how many went in with the one Enter
	}
	s.transitionEach(ctx, ms, "written to terminal", detail, func(x *queue.Message) error {
		return x.Written(at, t)
	})
	s.keepWake(m, wr)
	s.log.Debug("delivered", "message", m.ID, "messages", len(ms), "target", m.Target, "attempt", m.Attempts)
}

// withExtra is detail with extra's keys added.
func withExtra(detail, extra map[string]any) map[string]any {
	for k, v := range extra {
		detail[k] = v
	}
	return detail
}

// keepWake hands a wake written through a broker to the lease keeper: a
// wake goes alone, and its broker tells whether the agent took it.
func (s *deliverer) keepWake(m queue.Message, wr Written) {
	if leaseID, attempt, ok := store.WakeKey(m.IdempotencyKey); ok && m.SenderKind == queue.FromCoordination && wr.broker != nil {
		s.leaseWritten(store.DeliveryKey(m.EndpointID, m.Target), m.Target, leaseID, attempt, wr.broker, wr.brokerStates, wr.Outcome.Kind == api.EnterHeld)
	}
}

// transitionEach records one outcome for every message of a delivery in one
// transaction. A message that refuses it (acknowledged meanwhile: a late ack
// wins) keeps its state; if the database fails, the claims stay, expire, and
// the messages are delivered again.
func (s *deliverer) transitionEach(ctx context.Context, ms []queue.Message, reason string, detail map[string]any, change func(*queue.Message) error) {
	ids := make([]string, len(ms))
	for i, m := range ms {
		ids[i] = m.ID
	}
	// What happened at the terminal must be recorded: a claim left as it is
	// would hold the messages in delivering until the next start. When the
	// database refuses the write (the disk full), it is tried again each
	// second, with the window kept busy meanwhile, until it takes it or the
	// service stops (then the next start returns the claim to the queue).
	var refused spell
	var failed []error
	for {
		var err error
		failed, err = s.deliveries.TransitionEach(context.WithoutCancel(ctx), ids, reason, detail, change)
		if err == nil {
			break
		}
		refused.failed(s.clock.Now(), s.log, "cannot record a delivery; will try again", err)
		select {
		case <-ctx.Done():
			s.log.Warn("delivery left unrecorded at stop; the next start delivers it again", "message", ids[0], "messages", len(ids), "reason", reason)
			return
		case <-s.clock.After(time.Second):
		}
	}
	refused.ok(s.log, "recorded a delivery again")
	for i, ferr := range failed {
		if ferr != nil {
			s.log.Warn("record a delivery", "message", ids[i], "reason", reason, "error", ferr.Error())
		}
	}
}

// deferDelivery puts messages their window could not take back in the queue
// (their attempts not spent) and holds the window's deliveries until what
// stood in the way clears: the watcher lists the window again, or the broker
// says its agent is back at its prompt.
func (s *deliverer) deferDelivery(ctx context.Context, ms []queue.Message, wr Written) {
	m, reason := ms[0], wr.Outcome.Reason
	s.log.Info("delivery waits", "message", m.ID, "messages", len(ms), "target", m.Target, "reason", reason)
	now := s.clock.Now() // one time: the batch is due again as a whole
	s.transitionEach(ctx, ms, "window cannot take it now: "+reason, nil, func(x *queue.Message) error {
		return x.Deferred(now, reason)
	})
	switch {
	case wr.broker != nil:
		s.holdIfStill(wr.broker, wr.brokerStates, reason)
	case wr.Path == "broker":
		s.waits.setWait(fromBroker, m.EndpointID, m.Target, reason)
		// A broker that attached meanwhile may have reported already, and
		// reports again only on a change: its window is not held for the
		// broker it has.
		if s.brokers.get(store.DeliveryKey(m.EndpointID, m.Target)) != nil {
			s.waits.setWait(fromBroker, m.EndpointID, m.Target, "")
		}
	case wr.Outcome.Kind == api.NotAtPrompt:
		s.waits.setWait(fromScreen, m.EndpointID, m.Target, reason)
		// A broker that attached while the pane was looked at has cleared
		// the screen's hold already, or is about to: it reports its own
		// agent, and a hold set after its attach would never be lifted
		// (an idle service lists no panes).
		if s.brokers.get(store.DeliveryKey(m.EndpointID, m.Target)) != nil {
			s.waits.setWait(fromScreen, m.EndpointID, m.Target, "")
		}
	default:
		s.waits.setWait(fromPane, m.EndpointID, m.Target, reason)
		s.waits.requestList(m.EndpointID)
	}
	// The watcher may have seen the window change while these were being
	// written (the agent's pane died): it noted its reason on the messages
	// queued then, which these were not yet. They say the window's reason.
	if r := s.waitReason(store.DeliveryKey(m.EndpointID, m.Target)); r != "" && r != reason {
		if err := s.deliveries.NoteWaiting(context.WithoutCancel(ctx), m.EndpointID, m.Target, r); err != nil {
			s.log.Error("cannot note why messages wait", "repo", m.Target, "error", err.Error())
		}
	}
}

// holdIfStill holds the window for reason, as the broker's answer to a
// delivery said, unless the broker has reported its agent's state since that
// answer (states), or its session has ended (which frees the window as it
// closes): then the dispatcher looks again.
func (s *deliverer) holdIfStill(bc *brokerConn, states uint64, reason string) {
	bc.stateMu.Lock()
	defer bc.stateMu.Unlock()
	select {
	case <-bc.closed:
		s.dispatch.Wake()
		return
	default:
	}
	if bc.states != states {
		s.dispatch.Wake()
		return
	}
	s.waits.setWait(fromBroker, bc.endpointID, bc.repo, reason)
}

var errNoWindow = errors.New("no window is recorded for it on its endpoint")

// engineAskTimeout bounds the question to coordination-engine before a wake
// is written.
const engineAskTimeout = 2 * time.Second

// engineAskAgain is how soon a wake whose lease the engine could not confirm
// is looked at again.
const engineAskAgain = 2 * time.Second

// wakeStillCurrent asks coordination-engine, right before a wake (a claimed
// message from it) is written, whether its lease's attempt is still the one
// to work on. A wake whose lease ended (completed, stopped, ran out, a newer
// attempt offered) is cancelled, never typed; while the engine does not
// answer, the wake waits: a wake belongs to a lease the engine judges. Other
// messages are always current.
func (s *deliverer) wakeStillCurrent(ctx context.Context, m queue.Message) bool {
	leaseID, attempt, ok := store.WakeKey(m.IdempotencyKey)
	if m.SenderKind != queue.FromCoordination || !ok {
		return true
	}
	actx, cancel := context.WithTimeout(ctx, engineAskTimeout)
	res, err := s.engine.LeaseCurrent(actx, engineapi.LeaseArgs{LeaseID: leaseID, Attempt: attempt})
	cancel()
	now := s.clock.Now()
	switch {
	case err != nil:
		reason := "waiting for coordination-engine to confirm its lease: " + err.Error()
		s.log.Info("wake held: the engine did not confirm its lease", "message", m.ID, "lease", leaseID, "error", err.Error())
		s.transitionEach(ctx, []queue.Message{m}, reason, nil, func(x *queue.Message) error {
			if err := x.Deferred(now, reason); err != nil {
				return err
			}
			x.NextAttemptAt = now.Add(engineAskAgain)
			return nil
		})
		return false
	case !res.Current:
		s.log.Info("stale wake cancelled before it was written", "message", m.ID, "lease", leaseID, "attempt", attempt, "reason", res.Reason)
		s.transitionEach(ctx, []queue.Message{m}, "cancelled: "+res.Reason, nil, func(x *queue.Message) error {
			return x.Cancel(now, res.Reason)
		})
		return false
	}
	return true
}

// confirmOf is how a delivery of wakes is confirmed right before its first
// byte: each message still being delivered, not cancelled since it was
// claimed (the engine cancels a wake whose lease ended). Other deliveries
// need none.
func (s *deliverer) confirmOf(ctx context.Context, ms []queue.Message) *Confirm {
	var ids []string
	for _, m := range ms {
		if m.SenderKind == queue.FromCoordination {
			ids = append(ids, m.ID)
		}
	}
	if len(ids) == 0 {
		return nil
	}
	return &Confirm{IDs: ids, Current: func() (bool, string) { return s.stillDelivering(ctx, ids) }}
}

// stillDelivering says whether every message of ids is still being
// delivered; when one is not, why (its state and last error).
func (s *deliverer) stillDelivering(ctx context.Context, ids []string) (bool, string) {
	for _, id := range ids {
		m, err := s.deliveries.Get(ctx, id)
		if err != nil {
			return false, "cannot read message " + id + ": " + err.Error()
		}
		if m.State != queue.Delivering {
			why := "message " + id + " is " + string(m.State)
			if m.LastError != "" {
				why += ": " + m.LastError
			}
			return false, why
		}
	}
	return true, ""
}

// deliveryCurrent answers a broker's last question before it writes a
// delivery it must confirm.
func (s *deliverer) deliveryCurrent(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.DeliveryCurrentArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if len(args.IDs) == 0 || len(args.IDs) > 256 {
		return nil, errs.New(errs.BadRequest, "a delivery confirms 1 to 256 messages, not %d", len(args.IDs))
	}
	ok, why := s.stillDelivering(ctx, args.IDs)
	return api.DeliveryCurrentResult{Current: ok, Reason: why}, nil
}
