package service

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tamq/workspace"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// EngineLabel is the sender of wake prompts.
const EngineLabel = "coordination-engine"

// wakeHandlers answer coordination-engine's wakes and their cancellations:
// a wake is queued as a message for the repo's window (its agent started
// again when it exited and the configuration allows).
type wakeHandlers struct {
	log           *slog.Logger
	clock         clock.Clock
	config        *config.Loaded
	paths, engine paths.Paths
	registry      func() (*gita.Registry, error)
	reader        *sql.DB
	queue         *store.Queue
	endpoints     wakeEndpoints
	waits         windowWaitReasons
	brokers       wakeBrokers
	watcher       listRequests
	dispatcher    dispatchWakes
}

// wakeEndpoints are the recorded endpoints (endpointBook).
type wakeEndpoints interface {
	known(ctx context.Context) ([]queue.Endpoint, error)
	windowOf(ctx context.Context, endpointID, repo string) (queue.Endpoint, queue.Window, error)
}

// windowWaitReasons say why a window cannot take text now (live).
type windowWaitReasons interface {
	waitReason(key string) string
	paneHealthOf(key string) string
}

// wakeBrokers are the live broker sessions (brokerTable).
type wakeBrokers interface {
	view(key string) (st api.BrokerState, bc *brokerConn, seq uint64, live bool)
	isLive(endpointID, repo, paneID string) bool
}

// listRequests ask the watcher to list windows now, or to move stranded
// messages.
type listRequests interface {
	requestList(endpointIDs ...string)
	requestRebind(endpointIDs ...string)
}

// wakeOp queues coordination-engine's continuation prompt for the agent of one
// repo window (spec section 5). (lease_id, attempt) is the idempotency key:
// the identical request again answers with the original message and queues
// nothing; the same key with another request is a conflict.
func (s *wakeHandlers) wakeOp(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var w api.WakeRequest
	if err := unixrpc.DecodeArgs(req, &w); err != nil {
		return nil, err
	}
	if err := checkWake(w); err != nil {
		return nil, err
	}
	if err := s.coordinationAllowed("wake agents"); err != nil {
		return nil, err
	}
	reg, err := s.registry()
	if err != nil {
		return nil, err
	}
	if _, err := reg.Resolve(w.TargetRepo); err != nil {
		return nil, err
	}
	prompt, err := queue.CleanBody(w.Prompt)
	if err != nil {
		return nil, err
	}
	agentPrompt, err := queue.CleanBody(w.AgentPrompt)
	if w.AgentPrompt != "" && err != nil {
		return nil, err
	}
	key := w.LeaseID + "#" + strconv.Itoa(w.Attempt)
	hash := requestHash(w)
	ack := api.WakeAck{LeaseID: w.LeaseID, Attempt: w.Attempt, AcceptedAt: s.clock.Now()}

	// A repeat is answered from the database before anything else: the
	// window may have changed since, but the message is the one it was.
	if old, oldHash, found, err := s.wakeOf(ctx, key); err != nil {
		return nil, err
	} else if found {
		return s.repeated(ack, old, oldHash, hash)
	}

	ep, win, reason, wait, err := s.wakeTarget(ctx, w)
	if err != nil {
		return nil, err
	}
	if reason != "" {
		ack.Capability, ack.Reason, ack.Wait, ack.SessionID = api.WakeUnavailable, reason, wait, ep.ID
		return ack, nil
	}
	ack.SessionID, ack.Capability = ep.ID, api.WakeResumed
	if exited, why, err := s.agentExited(ctx, ep, win); err != nil {
		return nil, err
	} else if exited {
		if !s.config.Coordination.WakeRestartsAgent {
			ack.Capability, ack.Reason, ack.Wait = api.WakeUnavailable, why+"; coordination.wake_restarts_agent is off", api.WaitNoAgent
			return ack, nil
		}
		if err := s.restartAgent(ctx, ep, win); err != nil {
			ack.Capability, ack.Reason, ack.Wait = api.WakeUnavailable, "its agent exited and could not be started again: "+err.Error(), api.WaitNoAgent
			return ack, nil
		}
		ack.Capability = api.WakeStarted
	}
	// The broker acknowledges and renews only for an agent it reads; any
	// other is told to do it itself (an engine that sends one prompt is
	// answered as before).
	ack.Acks = api.AcksBroker
	if agentPrompt != "" && !s.brokerReads(ep, win) {
		prompt, ack.Acks = agentPrompt, api.AcksAgent
	}

	m := &queue.Message{
		EndpointID: ep.ID, Sender: EngineLabel, SenderKind: queue.FromCoordination, Target: w.TargetRepo,
		Body: prompt, AckMode: ackmode.Acknowledged, MaxRetries: s.config.Coordination.MaxRetries,
		IdempotencyKey: key, CorrelationID: w.Trigger.SourceRevision, CoordinationEndpointID: w.CoordinationEndpointID,
		PolicyProfile: s.config.ProfileRef(), ConfigVersion: s.config.Version,
		LastError: s.waits.waitReason(store.DeliveryKey(ep.ID, w.TargetRepo)),
	}
	old, oldHash, err := s.queue.EnqueueWake(ctx, m, hash)
	if err != nil {
		return nil, err
	}
	if old != nil {
		// An identical wake won the race to the database.
		return s.repeated(ack, *old, oldHash, hash)
	}
	s.log.Info("wake queued", "lease", w.LeaseID, "attempt", w.Attempt, "message", m.ID, "endpoint", ep.ID, "capability", ack.Capability, "acks", ack.Acks)
	s.dispatcher.wakeFor(m.EndpointID, m.Target)
	ack.MessageID = m.ID
	return ack, nil
}

// coordinationAllowed refuses coordination-engine's wakes (sent or
// replayed) unless tamq's policy profile lets coordination wake agents.
func (s *wakeHandlers) coordinationAllowed(what string) error {
	p := s.config.ActiveProfile()
	if !p.Allows(policy.CoordinationMessages) || !p.Allows(policy.TmuxWake) {
		return errs.New(errs.PolicyRefused, "policy profile %s does not let coordination-engine %s (it needs coordination_messages and tmux_wake)", s.config.ProfileRef(), what)
	}
	return nil
}

// repeated answers a wake whose key is taken: the original message when the
// request is the same, a conflict when it is not.
func (s *wakeHandlers) repeated(ack api.WakeAck, old queue.Message, oldHash, hash string) (any, error) {
	if oldHash != hash {
		return nil, errs.New(errs.Conflict, "lease %s attempt %d was already used for another wake (message %s)", ack.LeaseID, ack.Attempt, old.ID).
			WithHint("a new wake needs a new attempt or lease")
	}
	// The message may wait on a gone endpoint: the watcher moves it to the
	// endpoint's one replacement, never while the old one lives.
	s.watcher.requestRebind()
	ack.SessionID, ack.MessageID, ack.Capability, ack.Duplicate = old.EndpointID, old.ID, api.WakeResumed, true
	ack.AcceptedAt = old.CreatedAt
	return ack, nil
}

// wakeOf is the message of a wake's idempotency key, with its request hash.
func (s *wakeHandlers) wakeOf(ctx context.Context, key string) (queue.Message, string, bool, error) {
	m, hash, err := store.WakeByKey(ctx, s.reader, key)
	if errs.Is(err, errs.NotFound) {
		return m, "", false, nil
	}
	return m, hash, err == nil, err
}

// checkWake refuses malformed wake requests.
func checkWake(w api.WakeRequest) error {
	if p := textsafe.NameProblem(w.LeaseID); p != "" {
		return errs.New(errs.BadRequest, "lease id %q: %s", textsafe.Escape(w.LeaseID), p)
	}
	if w.Attempt < 1 || w.Attempt > 1000 {
		return errs.New(errs.BadRequest, "attempt %d is out of range 1..1000", w.Attempt)
	}
	for name, v := range map[string]string{
		"endpoint id": w.EndpointID, "coordination endpoint id": w.CoordinationEndpointID,
		"trigger revision": w.Trigger.SourceRevision, "target agent": w.TargetAgent,
	} {
		if v != "" {
			if p := textsafe.NameProblem(v); p != "" {
				return errs.New(errs.BadRequest, "%s %q: %s", name, textsafe.Escape(v), p)
			}
		}
	}
	return nil
}

// requestHash identifies a wake request's content: the same request always
// hashes the same (encoding/json writes struct fields in a fixed order).
func requestHash(w api.WakeRequest) string {
	b, _ := json.Marshal(w)
	sum := sha256.Sum256(b)
	return hex.EncodeToString(sum[:])
}

// wakeTarget resolves the one connected endpoint window hosting the repo. A
// non-empty reason says why there is none that can take the wake (nothing is
// queued then), and wait says it in one word for the engine; several
// without an explicit endpoint is an error.
func (s *wakeHandlers) wakeTarget(ctx context.Context, w api.WakeRequest) (queue.Endpoint, queue.Window, string, string, error) {
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		return queue.Endpoint{}, queue.Window{}, "", "", err
	}
	type host struct {
		ep  queue.Endpoint
		win queue.Window
	}
	var hosts []host
	for _, ep := range eps {
		if ep.State != queue.Connected || (w.EndpointID != "" && ep.ID != w.EndpointID) {
			continue
		}
		for _, win := range ep.Windows {
			if win.Repo == w.TargetRepo {
				hosts = append(hosts, host{ep, win})
			}
		}
	}
	switch {
	case len(hosts) == 0 && w.EndpointID != "":
		return queue.Endpoint{}, queue.Window{}, fmt.Sprintf("endpoint %s is not connected or has no window for %s", w.EndpointID, w.TargetRepo), api.WaitNoWindow, nil
	case len(hosts) == 0:
		return queue.Endpoint{}, queue.Window{}, "no connected endpoint has a window for " + w.TargetRepo, api.WaitNoWindow, nil
	case len(hosts) > 1:
		return queue.Endpoint{}, queue.Window{}, "", "", errs.New(errs.Conflict, "%d endpoints host %s; name one with endpoint_id", len(hosts), w.TargetRepo)
	case hosts[0].win.Mode == queue.Manual:
		return hosts[0].ep, hosts[0].win, "the window of " + w.TargetRepo + " was opened in manual mode", api.WaitManual, nil
	}
	// A shell runs what it is given, and so does one behind a wrapper
	// (script, ssh, sudo, docker run, screen): a wake is never written into
	// one (a window recorded in trigger mode before tamq refused that).
	if c := program.CheckTrigger(hosts[0].win.Command, s.config.Delivery.AgentPrograms); c.Refused {
		what := "a shell"
		if c.Via != "" {
			what = c.Via + " (" + c.Why + ")"
		}
		return hosts[0].ep, hosts[0].win, "the window of " + w.TargetRepo + " runs " + what + ", not an agent", api.WaitNoAgent, nil
	}
	return hosts[0].ep, hosts[0].win, "", "", nil
}

// brokerReads says whether the window's broker reads its agent, so that
// the lease keeper acknowledges and renews a wake's lease for it: what its
// live session last reported, or, before one has reported (an agent just
// started again), whether the window's command has screen rules.
func (s *wakeHandlers) brokerReads(ep queue.Endpoint, win queue.Window) bool {
	if st, _, _, live := s.brokers.view(store.DeliveryKey(ep.ID, win.Repo)); live {
		return st.Reads
	}
	return broker.AgentOf(program.Words(win.Command)) != ""
}

// cancelWakeOp is coordination-engine cancelling the wakes of a lease's
// attempts that ended: those not written yet, or waiting to be presented
// again, end cancelled with the engine's reason. (tamq asks the engine
// before it writes a wake anyway; this makes the history say so at once.)
func (s *wakeHandlers) cancelWakeOp(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.CancelWakeArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if p := textsafe.NameProblem(args.LeaseID); p != "" {
		return nil, errs.New(errs.BadRequest, "lease id %q: %s", textsafe.Escape(args.LeaseID), p)
	}
	if args.Attempt < 0 {
		return nil, errs.New(errs.BadRequest, "attempt %d is negative", args.Attempt)
	}
	reason := textsafe.Escape(args.Reason)
	if reason == "" {
		reason = "its lease ended"
	}
	ms, err := s.queue.CancelWakes(ctx, args.LeaseID, args.Attempt, reason)
	if err != nil {
		return nil, err
	}
	for _, m := range ms {
		s.log.Info("wake cancelled", "message", m.ID, "lease", args.LeaseID, "reason", reason)
	}
	if len(ms) > 0 {
		s.dispatcher.wake() // the window's next message may go now
	}
	return api.CancelWakeResult{Cancelled: len(ms)}, nil
}

// wakeHeldOp answers coordination-engine at the ack deadline of an attempt
// its agent did not acknowledge: was the wake ever written, and if not,
// what holds it? A wake that never reached the agent was not delivered, so
// the engine must not count it as an attempt the agent let run out: behind
// a dialog or in a window whose agent is not running it waits, and goes in
// when a person has answered or started the agent; on an endpoint that is
// gone (or forgotten, which fails it) nothing will write it, and the engine
// routes the work afresh.
func (s *wakeHandlers) wakeHeldOp(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.WakeHeldArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if p := textsafe.NameProblem(args.LeaseID); p != "" {
		return nil, errs.New(errs.BadRequest, "lease id %q: %s", textsafe.Escape(args.LeaseID), p)
	}
	if args.Attempt < 1 {
		return nil, errs.New(errs.BadRequest, "attempt %d is out of range", args.Attempt)
	}
	m, _, found, err := s.wakeOf(ctx, args.LeaseID+"#"+strconv.Itoa(args.Attempt))
	if err != nil || !found {
		return api.WakeHeldResult{}, err
	}
	res := api.WakeHeldResult{MessageID: m.ID, State: string(m.State)}
	if !m.InjectedAt.IsZero() {
		return res, nil // written: the agent had its prompt
	}
	held := func(wait, reason string) (any, error) {
		res.Held, res.Wait, res.Reason = true, wait, textsafe.Escape(reason)
		return res, nil
	}
	switch m.State {
	case queue.Cancelled, queue.Failed:
		return held(api.WaitNoWindow, "the wake was dropped unwritten: "+m.LastError)
	case queue.Queued, queue.Delivering:
	default:
		return res, nil // its text is in the input box, its Enter held back
	}
	ep, _, err := s.endpoints.windowOf(ctx, m.EndpointID, m.Target)
	switch {
	case errors.Is(err, errNoWindow):
		return held(api.WaitNoWindow, "endpoint "+m.EndpointID+" has no window for "+m.Target+" any more")
	case err != nil:
		return nil, err
	case ep.State != queue.Connected:
		return held(api.WaitNoWindow, "endpoint "+m.EndpointID+" is gone (its tmux server stopped)")
	}
	key := store.DeliveryKey(m.EndpointID, m.Target)
	switch why := s.waits.paneHealthOf(key); {
	case why == "":
	case strings.HasPrefix(why, paneExited):
		return held(api.WaitNoAgent, "the agent in the window of "+m.Target+" has exited")
	default:
		return held(api.WaitNoWindow, "the window of "+m.Target+": "+why)
	}
	// A dialog is named by its window alone: what it asks is screen
	// text, which the engine would keep and publish in its receipts.
	atDialog := "a dialog is open in the window of " + m.Target
	if st, _, _, live := s.brokers.view(key); live && st.Screen == broker.StateDialog {
		return held(api.WaitDialog, atDialog)
	}
	switch why := s.waits.waitReason(key); {
	case why == program.NoAgentRunning:
		return held(api.WaitNoAgent, "no agent runs in the window of "+m.Target)
	case strings.Contains(why, "dialog"):
		return held(api.WaitDialog, atDialog)
	case why == "":
		// Being written now (the broker waits for the agent's prompt),
		// or about to be: held for nothing a person must do.
		return held("", "")
	case strings.HasPrefix(why, notAtPromptWords):
		// The agent is at work (for a person, or on a screen tamq does
		// not know): it never saw the prompt, which goes in once it is
		// back at its prompt.
		return held(api.WaitBusy, "the agent in the window of "+m.Target+" is busy (not at its prompt)")
	}
	return res, nil // waiting for something else (its broker): it runs out as any attempt
}

// agentExited says whether the window's program has exited (its pane is
// dead), in words. A window whose broker holds its session runs: the broker
// lives as long as its agent. Only otherwise is tmux asked, which costs a
// process on the path a wake waits on.
func (s *wakeHandlers) agentExited(ctx context.Context, ep queue.Endpoint, win queue.Window) (bool, string, error) {
	if s.brokers.isLive(ep.ID, win.Repo, win.PaneID) {
		return false, "", nil
	}
	askCtx, cancel := askTmux(ctx)
	_, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
	cancel()
	if err != nil {
		return false, "", errs.Wrap(errs.Unavailable, err, "cannot ask the tmux server of %s", ep.ID)
	}
	for _, w := range wins {
		if w.PaneID == win.PaneID && w.Repo == win.Repo {
			if w.Dead {
				return true, "the agent in the window of " + win.Repo + " has exited", nil
			}
			return false, "", nil
		}
	}
	return true, "the window of " + win.Repo + " is gone", nil
}

// restartAgent runs the window's recorded command again in its own pane,
// under the broker, with the environment `tamq open` gives a window: never a
// new window or session, and never over a live program (tmux refuses).
func (s *wakeHandlers) restartAgent(ctx context.Context, ep queue.Endpoint, win queue.Window) error {
	if win.Command == "" {
		return errs.New(errs.Unavailable, "the window of %s has no recorded command", win.Repo)
	}
	exe, err := os.Executable()
	if err != nil {
		return errs.Wrap(errs.Internal, err, "cannot find the tamq executable")
	}
	reg, err := s.registry()
	if err != nil {
		return err
	}
	repo, ok := reg.Lookup(win.Repo)
	if !ok {
		return errs.New(errs.UnknownTarget, "%s is no longer registered in gita", win.Repo)
	}
	o := workspace.Options{TamqSocket: s.paths.Socket, EngineSocket: s.engine.Socket}
	argv := workspace.WindowArgv(workspace.Repo{Repo: repo, Command: win.Command}, workspace.Broker{Exe: exe, GitaDir: reg.Dir})
	askCtx, cancel := askTmux(ctx)
	defer cancel()
	if err := (tmux.Server{Socket: ep.TmuxSocket}).Respawn(askCtx, win.PaneID, repo.Path, argv, workspace.WindowEnv(win.Repo, ep.ID, o)); err != nil {
		return err
	}
	s.log.Info("agent started again for a wake", "repo", win.Repo, "pane", win.PaneID, "endpoint", ep.ID)
	s.watcher.requestList(ep.ID)
	return nil
}
