package service

import (
	"context"
	"log/slog"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// OperatorLabel is the sender of messages sent from outside any tamq window.
const OperatorLabel = "operator"

// messageHandlers answer the operations on messages: send, replay, ack and
// retry. New messages go to the queue writer; the dispatcher is woken for
// them.
type messageHandlers struct {
	log    *slog.Logger
	clock  clock.Clock
	config *config.Loaded
	// registry is gita's registry; addresses the watched reading of it every
	// send's address is checked against.
	registry, addresses func() (*gita.Registry, error)
	callers             callerPlaces
	endpoints           endpointLister
	// waitReason says why a window cannot take text now ("" when it can).
	waitReason func(key string) string
	// enqueue hands a new message to the queue writer.
	enqueue    func(ctx context.Context, m *queue.Message) error
	dispatcher dispatchWakes
	// requestRebind has the watcher move messages stranded on a gone
	// endpoint to its replacement.
	requestRebind func(endpointIDs ...string)
	queue         *store.Queue
	deliveries    *store.Deliveries
	receipts      *store.ReceiptLog
}

// callerPlaces says who a caller is (callers): the sender of a message,
// and the window a process runs in.
type callerPlaces interface {
	senderOf(ctx context.Context, peer unixrpc.Peer, operatorLine bool) (string, queue.SenderKind, error)
	paneOf(ctx context.Context, pid int32) (p paneSeen, self, ok bool)
}

// dispatchWakes wakes the dispatcher: for a new message, whose window may
// be busy, or for anything freed.
type dispatchWakes interface {
	wake()
	wakeFor(endpointID, target string)
}

func (s *messageHandlers) send(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.SendArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	sender, kind, err := s.callers.senderOf(ctx, peer, args.Operator)
	if err != nil {
		return nil, err
	}
	reg, err := s.addresses() // every address check sees the current registry
	if err != nil {
		return nil, err
	}
	target, body, err := queue.ParseAddress(args.Text, reg.Slugs())
	if errs.Is(err, errs.UnknownTarget) {
		// The registry's own error names near matches.
		if _, rerr := reg.Resolve(queue.AddressedSlug(args.Text)); rerr != nil {
			err = rerr
		}
		s.rejected(ctx, queue.AddressedSlug(args.Text), sender, kind, err)
	}
	if err != nil {
		return nil, err
	}
	if body, err = queue.CleanBody(body); err != nil {
		s.rejected(ctx, target, sender, kind, err)
		return nil, err
	}
	mode := s.config.Coordination.DeliveryAckMode
	if args.AckMode != "" {
		if mode, err = ackmode.Parse(args.AckMode); err != nil {
			return nil, errs.New(errs.BadRequest, "ack mode %v", err)
		}
	}
	endpoints, err := s.endpoints.known(ctx)
	if err != nil {
		return nil, err
	}
	epID, err := pickEndpoint(endpoints, target, args.EndpointID)
	if err != nil {
		return nil, err
	}
	m := &queue.Message{
		EndpointID: epID, Sender: sender, SenderKind: kind, Target: target, Body: body, AckMode: mode,
		MaxRetries:    s.config.Coordination.MaxRetries,
		PolicyProfile: s.config.ProfileRef(), ConfigVersion: s.config.Version,
	}
	// A window that cannot take text now keeps the message waiting; it says why.
	m.LastError = s.waitReason(store.DeliveryKey(epID, target))
	if args.ObservedAt != nil {
		// A line a broker kept while the service was down is recorded as said
		// when it was said; a time from the future is not believed.
		if at := args.ObservedAt.UTC(); !at.IsZero() && at.Before(s.clock.Now()) {
			m.CreatedAt = at
		}
	}
	if err := s.enqueue(ctx, m); err != nil {
		return nil, err
	}
	s.dispatcher.wakeFor(m.EndpointID, m.Target)
	return api.MessageOf(*m, false), nil
}

// rejected records a refused message: who sent it and why, never its text.
func (s *messageHandlers) rejected(ctx context.Context, target, sender string, kind queue.SenderKind, cause error) {
	r := newReceipt(s.config, store.KindRejected, "rejected", string(errs.CodeOf(cause)), map[string]any{
		"target": target, "sender": sender, "sender_kind": string(kind),
	})
	if err := s.receipts.AddReceipt(ctx, r); err != nil {
		s.log.Error("cannot record a refused message", "error", err.Error())
	}
}

// pickEndpoint resolves the one connected endpoint hosting target.
func pickEndpoint(endpoints []queue.Endpoint, target, want string) (string, error) {
	var hosts []string
	for _, ep := range endpoints {
		if ep.State != queue.Connected {
			continue
		}
		for _, w := range ep.Windows {
			if w.Repo == target {
				hosts = append(hosts, ep.ID)
			}
		}
	}
	if want != "" {
		for _, h := range hosts {
			if h == want {
				return h, nil
			}
		}
		return "", errs.New(errs.Unavailable, "endpoint %s does not host a connected window for %q", want, target)
	}
	switch len(hosts) {
	case 0:
		return "", errs.New(errs.Unavailable, "no connected endpoint has a window for %q", target).
			WithHint("open one with `tamq open %s`", target)
	case 1:
		return hosts[0], nil
	}
	return "", errs.New(errs.Conflict, "%q has windows on %d endpoints (%s)", target, len(hosts), strings.Join(hosts, ", ")).
		WithHint("name one with --endpoint")
}

func (s *messageHandlers) ack(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m, err := s.deliveries.Transition(ctx, args.ID, "acknowledged", func(m *queue.Message) error {
		// An agent acknowledges what was delivered to it, never another
		// repo's message (which would drop it unread).
		if err := door.Owns(door.CallerOf(ctx), "message "+m.ID, m.Target); err != nil {
			return err
		}
		m.Ack(s.clock.Now())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return api.MessageOf(m, false), nil
}

// cancel is the operator's `tamq cancel`: a queued message, which waits to
// be written (for a shell window, until someone runs an agent there), ends
// cancelled, with its receipt, and the window's next message may go. One
// being written or written is not: the broker may be typing it, a held one
// is in the input box already, and what was written is stopped from coming
// again by `tamq ack`. A wake is the engine's (its lease decides it).
func (s *messageHandlers) cancel(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m, err := s.deliveries.Transition(ctx, args.ID, "cancelled by the operator", func(m *queue.Message) error {
		switch {
		case m.SenderKind == queue.FromCoordination:
			return errs.New(errs.Conflict, "message %s is a wake from coordination-engine; its lease decides it", m.ID).
				WithHint("`coordination-engine leases` shows the lease; its wakes are cancelled when it ends")
		case m.State == queue.AwaitingAck:
			return errs.New(errs.Conflict, "message %s was written already (awaiting_ack); cannot cancel it", m.ID).
				WithHint("`tamq ack %s` stops it from being presented again", m.ID)
		case m.State == queue.Held:
			return errs.New(errs.Conflict, "message %s is held: its text is in the agent's input box already; cannot cancel it", m.ID).
				WithHint("clear the input box in its window, or press Enter there to send it")
		case m.State != queue.Queued:
			return errs.New(errs.Conflict, "message %s is %s; only a queued message can be cancelled", m.ID, m.State)
		}
		return m.Cancel(s.clock.Now(), "cancelled by the operator")
	})
	if err != nil {
		return nil, err
	}
	s.dispatcher.wake() // the window's next message may go now
	return api.MessageOf(m, false), nil
}

func (s *messageHandlers) retry(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m, err := s.deliveries.Transition(ctx, args.ID, "retry requested", func(m *queue.Message) error {
		// An agent may retry what it sent or what was sent to it; another
		// repo's messages are the operator's to move.
		c := door.CallerOf(ctx)
		if sent := c.Kind == door.Agent && m.Sender == c.Repo && m.SenderKind == queue.FromWorker; !sent {
			if err := door.Owns(c, "message "+m.ID, m.Target); err != nil {
				return err
			}
		}
		return m.Retry(s.clock.Now())
	})
	if err != nil {
		return nil, err
	}
	// A message whose endpoint is gone moves to its replacement, if any.
	s.requestRebind()
	s.dispatcher.wake()
	return api.MessageOf(m, false), nil
}

// timing is the state machine's view of the configuration.
func timing(c *config.Loaded) queue.Timing {
	return queue.Timing{
		AckTimeout: time.Duration(c.Coordination.WakeAckTimeoutSeconds) * time.Second,
		Backoff:    c.RetryBackoff,
	}
}
