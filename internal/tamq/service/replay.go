package service

import (
	"context"
	"errors"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// KindReplayed is the receipt of a finished replay run.
const KindReplayed = "history.replayed"

// replay queues one chunk of a replay run into an endpoint. Every entry goes
// through what a new message goes through (registered target with a window
// on that endpoint, body rules, ack mode, the active policy) and the replay
// deduplication; nothing existing is changed.
func (s *messageHandlers) replay(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.ReplayArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	endpoints, err := s.endpoints.known(ctx)
	if err != nil {
		return nil, err
	}
	if !hasEndpoint(endpoints, args.EndpointID) {
		return nil, errs.New(errs.NotFound, "no endpoint %q", args.EndpointID).WithHint("`tamq status` lists the endpoints")
	}
	res := api.ReplayResult{BatchID: args.BatchID, Outcomes: []api.ReplayOutcome{}}
	if res.BatchID == "" {
		res.BatchID = store.NewID()
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	// A file replayed from a window speaks for that window's repo only: its
	// lines may not claim the operator, another repo or the engine.
	caller, _, inWindow := s.callers.paneOf(ctx, peer.PID)
	var msgs []*queue.Message
	var at []int // outcome index of each message
	for _, e := range args.Entries {
		m, err := s.replayed(e, reg.Resolve, endpoints, args.EndpointID)
		if err == errWakeSkipped {
			// Not a rejection: an export of a history that held work the
			// engine handed out always has wakes, and replaying such a file
			// must land its messages and exit 0.
			res.Outcomes = append(res.Outcomes, api.ReplayOutcome{Line: e.Line, Status: api.ReplaySkipped, Reason: err.Error()})
			continue
		}
		if err == nil && inWindow && (e.Sender != caller.repo || m.SenderKind != queue.FromWorker && m.SenderKind != queue.FromReplay) {
			err = errs.New(errs.PermissionDeny, "a line sent as %s (%s) cannot be replayed from %s's window: only its own messages",
				e.Sender, m.SenderKind, caller.repo)
		}
		if err != nil {
			res.Outcomes = append(res.Outcomes, api.ReplayOutcome{Line: e.Line, Status: api.ReplayRejected,
				Code: string(errs.CodeOf(err)), Reason: err.Error()})
			if args.Strict {
				break
			}
			continue
		}
		at = append(at, len(res.Outcomes))
		msgs = append(msgs, m)
		res.Outcomes = append(res.Outcomes, api.ReplayOutcome{Line: e.Line})
	}
	if len(msgs) > 0 {
		inserted, err := s.queue.Replay(ctx, res.BatchID, msgs)
		if err != nil {
			return nil, err
		}
		for i, m := range msgs {
			o := &res.Outcomes[at[i]]
			if o.Status = api.ReplayDuplicate; inserted[i] {
				o.Status, o.ID = api.ReplayAccepted, m.ID
			}
		}
		s.dispatcher.wake()
	}
	if sum := args.Summary; sum != nil {
		r := newReceipt(s.config, KindReplayed, "replayed", "", map[string]any{
			"batch_id": res.BatchID, "lines": sum.Lines, "accepted": sum.Accepted,
			"duplicates": sum.Duplicates, "skipped": sum.Skipped, "rejected": sum.Rejected,
		})
		r.SubjectID, r.EndpointID = res.BatchID, args.EndpointID
		if err := s.receipts.AddReceipt(ctx, r); err != nil {
			return nil, err
		}
	}
	return res, nil
}

// errWakeSkipped marks an entry that is a wake from coordination-engine:
// left out of the replay (ReplaySkipped), which goes on without it.
var errWakeSkipped = errors.New("a wake from coordination-engine is not replayed: it belongs to a lease the engine judges, not to history (`coordination-engine wake REPO` asks for a new one)")

// replayed checks one entry and makes the message it becomes.
func (s *messageHandlers) replayed(e api.ReplayEntry, resolve func(string) (gita.Repo, error), endpoints []queue.Endpoint, endpointID string) (*queue.Message, error) {
	if e.Original == "" || e.Sender == "" {
		return nil, errs.New(errs.BodyInvalid, "the line has no id or no sender")
	}
	// Every field that reaches a terminal or a screen is a name; the sender
	// is typed into the receiver's terminal, so it must be one tamq could
	// have written itself.
	if err := queue.CheckFields([][2]string{{"id", e.Original}, {"sender", e.Sender}, {"target", e.Target},
		{"idempotency_key", e.IdempotencyKey}, {"correlation_id", e.CorrelationID},
		{"coordination_endpoint_id", e.CoordinationEndpointID}}...); err != nil {
		return nil, err
	}
	kind := queue.SenderKind(e.SenderKind)
	switch kind {
	case queue.FromWorker, queue.FromOperator, queue.FromReplay:
	case queue.FromCoordination:
		// A wake belongs to a lease the engine judges (its gates, its
		// attempts, whether it still lives), not to history: typed again
		// from a file it would ask an agent to work on what may be done,
		// stopped or someone else's now. It is left out, not rejected.
		return nil, errWakeSkipped
	default:
		return nil, errs.New(errs.BodyInvalid, "sender kind %q is not worker, operator, coordination or replay", e.SenderKind)
	}
	if _, err := resolve(e.Target); err != nil {
		return nil, err
	}
	if _, err := resolve(e.Sender); err != nil && e.Sender != OperatorLabel {
		return nil, errs.New(errs.BodyInvalid, "sender %q is neither a registered repo nor %s", e.Sender, OperatorLabel)
	}
	if _, err := pickEndpoint(endpoints, e.Target, endpointID); err != nil {
		return nil, err
	}
	body, err := queue.CleanBody(e.Body)
	if err != nil {
		return nil, err
	}
	mode := s.config.Coordination.DeliveryAckMode
	if e.AckMode != "" {
		if mode, err = ackmode.Parse(e.AckMode); err != nil {
			return nil, errs.New(errs.BodyInvalid, "ack mode %v", err)
		}
	}
	return &queue.Message{
		EndpointID: endpointID, Sender: e.Sender, SenderKind: kind, Target: e.Target, Body: body, AckMode: mode,
		MaxRetries: s.config.Coordination.MaxRetries, ReplayOf: e.Original,
		IdempotencyKey: e.IdempotencyKey, CorrelationID: e.CorrelationID, CoordinationEndpointID: e.CoordinationEndpointID,
		PolicyProfile: s.config.ProfileRef(), ConfigVersion: s.config.Version,
	}, nil
}

func hasEndpoint(endpoints []queue.Endpoint, id string) bool {
	for _, ep := range endpoints {
		if ep.ID == id {
			return true
		}
	}
	return false
}
