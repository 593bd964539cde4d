package service

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"log/slog"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/receipt"
	"github.com/tmux-amq/tamq/internal/secretscan"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// The engine relays to State Hub, for an agent, what only the engine can
// reach it with (State Hub's address and credentials are the engine's, not
// the agent's window's): a message's body to read, a message to mark
// read, a status the agent states for its task. It relays what the agent
// states and decides nothing; it keeps no body and no note, and its
// receipts carry ids and statuses only.

// relayHandlers answer what an agent asks of State Hub through the engine:
// a message shown and marked read, a task's status set.
type relayHandlers struct {
	store *store.Store
	log   *slog.Logger
	hub   statehub.Hub
	// view is the observer's last look; lookNow wakes it.
	view    *hubView
	lookNow wakeup.Signal
	// receipts are sent to State Hub by the outbox, woken when one waits.
	receipts interface{ Kick() }
}

func (rh *relayHandlers) ops() ops {
	return ops{
		api.OpMessageShow: {door.Window, rh.messageShow},
		api.OpMessageRead: {door.Window, rh.messageRead},
		api.OpTaskSet:     {door.Window, rh.taskSet},
		api.OpTaskShow:    {door.Window, rh.taskShow},
	}
}

// maxShownSubject bounds the subject message_show answers with: a line,
// as the prompt shows it, so the message's fields never crowd the body
// out of a frame.
const maxShownSubject = 1 << 10

// messageShow answers a message and its body from the asked offset, as
// much as fits one frame. The body is fetched from State Hub at every call
// and scanned for secret material like a prompt: a hit withholds it (the
// secret gate), and nothing of it is logged or kept.
func (rh *relayHandlers) messageShow(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.MessageShowArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := api.CheckStateHubID("message id", args.MessageID); err != nil {
		return nil, err
	}
	m, err := rh.hub.Message(ctx, args.MessageID)
	if errs.Is(err, errs.NotFound) {
		return nil, errs.New(errs.NotFound, "State Hub has no message %s", args.MessageID).
			WithHint("a tracker without %s answers 404 too; then read the message with the tracker's own tools", statehub.RouteMessage)
	}
	if err != nil {
		return nil, err
	}
	if err := mayActOn(ctx, "message "+args.MessageID, m.ToRepo); err != nil {
		return nil, err
	}
	if err := checkPiece("message "+args.MessageID, args.PieceArgs, m.Revision, m.Body); err != nil {
		return nil, err
	}
	res := api.MessageShowResult{Message: m.Message, Piece: api.Piece{BodyBytes: len(m.Body), Offset: args.Offset}}
	res.Message.Subject = textsafe.Cut(m.Subject, maxShownSubject)
	if w := withheld(shownField{"subject", m.Subject}, shownField{"body", m.Body}); w != nil {
		res.Withheld, res.Offset = w, 0
		if w.Field == "subject" {
			res.Message.Subject = ""
		}
		rh.recordWithheld(ctx, store.KindMessageWithheld, w, map[string]any{"message_id": m.ID})
		return res, nil
	}
	if err := fillPiece(&res.Piece, res, m.Body, "State Hub's message "+args.MessageID); err != nil {
		return nil, err
	}
	return res, nil
}

// shownField is a field of what an agent reads through the engine: its
// name as the answer calls it, and its text.
type shownField struct{ name, text string }

// withheld scans the fields an agent would read, in order (the body last),
// for secret material: the first hit withholds them all (the secret gate).
func withheld(fields ...shownField) *api.Withheld {
	for _, field := range fields {
		if f, hit := secretscan.Scan(field.text); hit {
			return &api.Withheld{Field: field.name, Rule: f.Rule, Offset: f.Offset, Gate: observe.GateSecret}
		}
	}
	return nil
}

// recordWithheld says, in the log and a receipt, what was withheld and by
// which rule; never the text.
func (rh *relayHandlers) recordWithheld(ctx context.Context, kind string, w *api.Withheld, detail map[string]any) {
	rh.log.Warn("a text withheld: it holds secret material", "kind", kind, "field", w.Field, "rule", w.Rule)
	rh.relayReceipt(ctx, receipt.Receipt{Kind: kind, Status: "stopped",
		Reason: observe.GateSecret + ": the " + w.Field + " holds secret material (" + w.Rule + ")", Detail: detail})
}

// checkPiece refuses a piece asked of what (of body, at revision now) that
// cannot be answered: the text changed since the first piece, or the
// offset is not where a piece starts.
func checkPiece(what string, args api.PieceArgs, revision, body string) error {
	switch {
	case args.Revision != "" && revision != args.Revision:
		return errs.New(errs.Conflict, "%s changed while it was read (revision %s, now %s)", what, args.Revision, revision).
			WithHint("show it again")
	case args.Offset < 0 || args.Offset > len(body) || args.Offset < len(body) && !utf8.RuneStart(body[args.Offset]):
		return errs.New(errs.BadRequest, "offset %d is not where a piece of %s starts", args.Offset, what)
	}
	return nil
}

// fillPiece puts into p, which whole holds, the piece of body from
// p.Offset that fits one frame beside the rest of whole.
func fillPiece(p *api.Piece, whole any, body, what string) error {
	rest, err := json.Marshal(whole)
	if err != nil {
		return errs.Wrap(errs.Internal, err, "encode %s", what)
	}
	budget := frameBudget - len(rest)
	if budget < 1<<10 {
		return errs.New(errs.BadRequest, "%s has fields too long to relay", what)
	}
	p.Body, p.Next = bodyPiece(body, p.Offset, budget)
	return nil
}

// bodyPiece is the longest piece of body from offset whose JSON encoding
// fits budget bytes, cut between characters, and where the rest starts (0
// when nothing is left).
func bodyPiece(body string, offset, budget int) (string, int) {
	size := 0
	for i, r := range body[offset:] {
		if size += jsonLen(r); size > budget {
			return body[offset : offset+i], offset + i
		}
	}
	return body[offset:], 0
}

// jsonLen is at least what encoding/json writes for r in a string.
func jsonLen(r rune) int {
	switch {
	case r == '\n' || r == '\r' || r == '\t' || r == '"' || r == '\\':
		return 2
	case r < 0x20 || r == '<' || r == '>' || r == '&' || r == '\u2028' || r == '\u2029' || r == utf8.RuneError:
		return 6
	}
	return utf8.RuneLen(r)
}

// messageRead marks a message read in State Hub.
func (rh *relayHandlers) messageRead(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.MessageReadArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := api.CheckStateHubID("message id", args.MessageID); err != nil {
		return nil, err
	}
	if c := callerFrom(ctx); c.Kind == door.Agent {
		// An agent marks read only what was sent to its repo.
		m, err := rh.hub.Message(ctx, args.MessageID)
		if err != nil && !errs.Is(err, errs.NotFound) && !errs.Is(err, errs.Unsupported) {
			return nil, err
		}
		if err == nil {
			if err := mayActOn(ctx, "message "+args.MessageID, m.ToRepo); err != nil {
				return nil, err
			}
		}
	}
	err := rh.hub.MarkRead(ctx, args.MessageID)
	if errs.Is(err, errs.NotFound) {
		err = rh.messageNotFound(ctx, args.MessageID)
	}
	rh.relayReceipt(ctx, relayed(store.KindMessageRead, "read", err, map[string]any{"message_id": args.MessageID}))
	if err != nil {
		return nil, err
	}
	return api.MessageReadResult{MessageID: args.MessageID, Read: true}, nil
}

// messageNotFound tells, after a 404 to marking a message read, an
// unknown message from a tracker without the route: State Hub is asked
// for the message itself.
func (rh *relayHandlers) messageNotFound(ctx context.Context, id string) error {
	_, err := rh.hub.Message(ctx, id)
	switch {
	case err == nil:
		return errs.New(errs.Unsupported, "State Hub has message %s but answered 404 to %s: it does not offer the route", id, statehub.RouteMarkRead).
			WithHint("mark it read with the tracker's own tools")
	case errs.Is(err, errs.Unsupported):
		return errs.New(errs.Unsupported, "State Hub offers neither %s nor %s", statehub.RouteMarkRead, statehub.RouteMessage).
			WithHint("mark it read with the tracker's own tools")
	}
	return errs.New(errs.NotFound, "State Hub has no message %s", id).
		WithHint("a tracker without %s answers 404 too; then use its own tools", statehub.RouteMarkRead)
}

// taskSet states a task's status in State Hub, as the agent gave it. The
// note goes to the tracker only; one that holds secret material is not
// sent.
func (rh *relayHandlers) taskSet(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.TaskSetArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := args.Check(); err != nil {
		return nil, err
	}
	if c := callerFrom(ctx); c.Kind == door.Agent {
		// An agent states the status of its own repo's tasks only.
		repo, err := rh.repoOfTask(ctx, args.TaskID)
		if err != nil {
			return nil, err
		}
		if err := mayActOn(ctx, "task "+args.TaskID, repo); err != nil {
			return nil, err
		}
	}
	if f, hit := secretscan.Scan(args.Note); hit {
		return nil, errs.New(errs.PolicyRefused, "the note holds secret material (%s); it was not sent", f).
			WithHint("state the status without it")
	}
	err := rh.hub.SetTask(ctx, args.TaskID, contract.TaskUpdate{Status: args.Status, Note: args.Note})
	if errs.Is(err, errs.NotFound) && rh.hub.Kind() == statehub.KindContract {
		// The contract's 404 is also what a tracker without the route
		// answers; the other drivers know their routes.
		err = rh.taskNotFound(args.TaskID)
	}
	rh.relayReceipt(ctx, relayed(store.KindTaskSet, args.Status, err, map[string]any{"task_id": args.TaskID}))
	if err != nil {
		return nil, err
	}
	// What waited on the task may be actionable now: look at once rather
	// than at the next poll (a tracker without events gives no hint).
	rh.lookNow.Wake()
	return api.TaskSetResult{TaskID: args.TaskID, Status: args.Status}, nil
}

// repoOfTask is the repo of a task as the engine's last look at State Hub
// saw it, else as the engine's own triggers of it say (a task the engine
// woke an agent for: an engine just started has not looked yet).
func (rh *relayHandlers) repoOfTask(ctx context.Context, id string) (string, error) {
	if v, known := rh.view.task(id); known {
		return v.Repo, nil
	}
	trs, err := rh.store.Triggers.TriggersOfTask(ctx, id)
	if err != nil {
		return "", err
	}
	if len(trs) > 0 {
		return trs[len(trs)-1].TargetRepo, nil
	}
	return "", errs.New(errs.NotFound, "coordination-engine knows no task %s (neither in State Hub nor woken for)", id).
		WithHint("an agent sets the status of its own repo's tasks; a person sets the others'")
}

// taskNotFound tells, after a 404 to a task's status, an unknown task from
// a tracker without the route: a task the engine's last look at State Hub
// saw exists there.
func (rh *relayHandlers) taskNotFound(id string) error {
	if _, known := rh.view.task(id); known {
		return errs.New(errs.Unsupported, "State Hub lists task %s but answered 404 to %s: it does not offer the route", id, statehub.RouteTaskSet).
			WithHint("set the task's status with the tracker's own tools")
	}
	return errs.New(errs.NotFound, "State Hub has no task %s", id).
		WithHint("a tracker without %s answers 404 too; then use its own tools", statehub.RouteTaskSet)
}

// relayed is the receipt of a relayed request: the status stated (or
// "read"), or "failed" with the error's code, never its text, which may
// quote the tracker.
func relayed(kind, status string, err error, detail map[string]any) receipt.Receipt {
	r := receipt.Receipt{Kind: kind, Status: status, Detail: detail}
	if err != nil {
		r.Status, r.Reason = "failed", string(errs.CodeOf(err))
	}
	return r
}

// relayReceipt writes a relayed request's receipt. The request is done
// (State Hub has it) whether or not the receipt can be written, so a
// failure is logged, not answered.
func (rh *relayHandlers) relayReceipt(ctx context.Context, r receipt.Receipt) {
	if r.Detail == nil {
		r.Detail = map[string]any{}
	}
	callerDetail(callerFrom(ctx), r.Detail)
	if err := rh.store.Receipts.AddReceipt(ctx, r); err != nil {
		rh.log.Error("cannot write the receipt of a relayed request", "kind", r.Kind, "error", err.Error())
		return
	}
	rh.receipts.Kick()
}

// taskShow answers a task and its description from the asked offset, as
// much as fits one frame, for the agent that works on it (or the
// operator). The description is the tracker's text, read at every call and
// scanned for secret material like a prompt: a hit withholds it (the
// secret gate); nothing of it is logged or kept.
func (rh *relayHandlers) taskShow(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.TaskShowArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := api.CheckStateHubID("task id", args.TaskID); err != nil {
		return nil, err
	}
	if !rh.hub.Offers().TaskBodies {
		return nil, errs.New(errs.Unsupported, "State Hub (%s) has no task descriptions: the title is all there is", rh.hub.Kind()).
			WithHint("the wake prompt names the task and its title")
	}
	tb, err := rh.hub.TaskBody(ctx, args.TaskID)
	if err != nil {
		return nil, err
	}
	if err := mayActOn(ctx, "task "+args.TaskID, tb.Repo); err != nil {
		return nil, err
	}
	sum := sha256.Sum256([]byte(tb.Title + "\x00" + tb.Body))
	res := api.TaskShowResult{Task: api.TaskShown{ID: tb.ID, Title: textsafe.Cut(tb.Title, maxShownSubject), Repo: tb.Repo, Status: tb.Status,
		URL: tb.URL, Revision: hex.EncodeToString(sum[:8])}, Piece: api.Piece{BodyBytes: len(tb.Body), Offset: args.Offset}}
	if err := checkPiece("task "+args.TaskID, args.PieceArgs, res.Task.Revision, tb.Body); err != nil {
		return nil, err
	}
	if w := withheld(shownField{"title", tb.Title}, shownField{"body", tb.Body}); w != nil {
		res.Withheld, res.Offset = w, 0
		if w.Field == "title" {
			res.Task.Title = ""
		}
		rh.recordWithheld(ctx, store.KindTaskWithheld, w, map[string]any{"task_id": tb.ID})
		return res, nil
	}
	if err := fillPiece(&res.Piece, res, tb.Body, "State Hub's task "+args.TaskID); err != nil {
		return nil, err
	}
	return res, nil
}
