package service

import (
	"context"
	"errors"
	"strings"
	"time"

	engineapi "github.com/tmux-amq/tamq/internal/engineapi"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Writer puts text into a window's terminal. confirm, when not nil, is
// asked right before the first byte whether the delivery is still wanted
// (its messages not cancelled meanwhile); false writes nothing.
type Writer interface {
	Write(ctx context.Context, ep queue.Endpoint, w queue.Window, text string, confirm *Confirm) (Written, error)
}

// Confirm names the messages a writer confirms with the service right
// before the first byte, and how (Current reads their state now).
type Confirm struct {
	IDs     []string
	Current func() (bool, string)
}

// Written is what a Writer reports of one delivery.
type Written struct {
	// MaybeWritten, on failure, says whether any byte may have arrived (then
	// the text is never resent blindly).
	MaybeWritten bool
	// At is when the last byte (the Enter) went in; zero means when Write
	// returned.
	At time.Time
	// Path is "broker" or "tmux".
	Path string
	// Moment, through a broker: "quiet" when the agent's output was quiet and
	// the operator not mid-line, "bounded" when the wait for that ran out.
	Moment   string
	WaitedMS int64
	// Deferred: nothing was written because the window cannot take text now
	// (its agent has exited, its pane is gone or is not the window's any more,
	// or the agent is not at its input prompt); Reason says which. The
	// message waits for the window, without spending an attempt.
	Deferred bool
	Reason   string
	// NotAtPrompt: deferred because the program was not at its input prompt.
	NotAtPrompt bool
	// Cancelled: nothing was written because the confirmation said the
	// delivery is no longer wanted (its messages were cancelled).
	Cancelled bool
	// Held: the text went in but the broker held the Enter back; it names
	// why in a word (dialog, busy, unknown screen), Reason in words.
	Held string
	// broker is the session that answered, and brokerStates how many agent
	// states it had reported before its answer.
	broker       *brokerConn
	brokerStates uint64
}

// detail is the receipt detail of a delivery: how, never what.
func (w Written) detail() map[string]any {
	d := map[string]any{"path": w.Path}
	if w.Moment != "" {
		d["moment"], d["waited_ms"] = w.Moment, w.WaitedMS
	}
	return d
}

// TmuxWriter writes through tmux: one bracketed paste of the whole text
// through a uniquely named buffer, a pause, then Enter as a write of its own
// (docs/delivery.md explains why).
type TmuxWriter struct {
	Pause func(text string) time.Duration
	// Agent says whether an agent is the foreground program of the
	// window's pane, and whose screen rules apply; nil: the window's
	// recorded command runs, always.
	Agent func(ctx context.Context, ep queue.Endpoint, w queue.Window) program.Verdict
}

// agent is Agent's answer, or the recorded command's.
func (tw TmuxWriter) agent(ctx context.Context, ep queue.Endpoint, w queue.Window) program.Verdict {
	if tw.Agent == nil {
		return program.Verdict{Running: true, Rules: broker.AgentOf(strings.Fields(w.Command))}
	}
	return tw.Agent(ctx, ep, w)
}

// Write implements Writer. Both writes are guarded: tmux itself checks, at
// the moment of each, that the pane is the window's (same server, same repo
// mark) and that its program is alive.
func (tw TmuxWriter) Write(ctx context.Context, ep queue.Endpoint, w queue.Window, text string, confirm *Confirm) (Written, error) {
	srv := tmux.Server{Socket: ep.TmuxSocket}
	g := tmux.Guard{PaneID: w.PaneID, ServerPID: ep.ServerPID, Repo: w.Repo}
	// Nothing goes in unless an agent is the foreground program (a shell
	// would run every line), at its input prompt: the Enter would otherwise
	// answer whatever dialog shows. The agent is looked at last, right
	// before the paste.
	noAgent := Written{Path: "tmux", Deferred: true, NotAtPrompt: true, Reason: program.NoAgentRunning}
	v := tw.agent(ctx, ep, w)
	if !v.Running {
		return noAgent, errs.New(errs.Unavailable, "nothing written: %s", program.NoAgentRunning)
	}
	if ok, why := paneAtPrompt(ctx, srv, w, v.Rules); !ok {
		return Written{Path: "tmux", Deferred: true, NotAtPrompt: true, Reason: notAtPrompt(why)}, errs.New(errs.Unavailable, "nothing written: %s", why)
	}
	if !tw.agent(ctx, ep, w).Running {
		return noAgent, errs.New(errs.Unavailable, "nothing written: %s", program.NoAgentRunning)
	}
	if confirm != nil {
		if ok, why := confirm.Current(); !ok {
			return Written{Path: "tmux", Cancelled: true, Reason: why}, errs.New(errs.Conflict, "not written: %s", why)
		}
	}
	if err := srv.Paste(ctx, g, text); err != nil {
		if r := tmux.RefusalOf(err); r != nil {
			return Written{Path: "tmux", Deferred: true, Reason: r.Reason}, err
		}
		return Written{Path: "tmux", MaybeWritten: !errors.Is(err, tmux.ErrNotWritten)}, err
	}
	select {
	case <-time.After(tw.Pause(text)):
	case <-ctx.Done():
		return Written{Path: "tmux", MaybeWritten: true}, ctx.Err()
	}
	if ok, why := pasteShows(ctx, srv, w, text, v.Rules); !ok {
		// The text is in but not where the Enter would submit it: no Enter.
		return Written{Path: "tmux", MaybeWritten: true}, errs.New(errs.Unavailable, "the text is in but the Enter was held back: %s", why)
	}
	if !tw.stillAgent(ctx, ep, w) {
		// The agent left the foreground during the pause: an Enter now
		// would go to whatever took it.
		return Written{Path: "tmux", MaybeWritten: true}, errs.New(errs.Unavailable, "the text is in but the Enter was held back: %s", program.NoAgentRunning)
	}
	if err := srv.SendEnter(ctx, g); err != nil {
		return Written{Path: "tmux", MaybeWritten: true}, err
	}
	return Written{Path: "tmux"}, nil
}

// stillAgent looks again, after the text went in, whether the agent is the
// foreground program. A process caught in the middle of an exec (a
// wrapper's `sh -c '…; exec agent'`) shows no command line for a moment, so
// a "no" is looked at twice more before the text is given up on: the
// process table offers no event to wait on.
func (tw TmuxWriter) stillAgent(ctx context.Context, ep queue.Endpoint, w queue.Window) bool {
	for try := 0; ; try++ {
		if tw.agent(ctx, ep, w).Running {
			return true
		}
		if try == 2 {
			return false
		}
		select {
		case <-time.After(25 * time.Millisecond):
		case <-ctx.Done():
			return false
		}
	}
}

// screenOf reads a pane as the broker's detector reads its model; rules
// names the agent whose screen rules apply (program.Verdict.Rules).
func screenOf(ctx context.Context, srv tmux.Server, w queue.Window, rules string) (broker.Screen, error) {
	c, err := srv.Capture(ctx, w.PaneID)
	if err != nil {
		return broker.Screen{}, err
	}
	return broker.Screen{Rows: c.Rows, Cols: c.Width, CursorX: c.CursorX, CursorY: c.CursorY, CursorVisible: c.CursorVisible,
		Title: c.Title, AltScreen: c.AltScreen, Agent: rules}, nil
}

// paneAtPrompt says whether a window without a broker shows its program at
// its input prompt, with the broker's rules; a pane that cannot be read is
// not. (The guard of the write still checks the pane itself.)
func paneAtPrompt(ctx context.Context, srv tmux.Server, w queue.Window, rules string) (bool, string) {
	scr, err := screenOf(ctx, srv, w, rules)
	if err != nil {
		return false, "its screen cannot be read: " + err.Error()
	}
	return broker.AtPrompt(scr)
}

// pasteShows says whether the pasted text sits in the program's input box.
func pasteShows(ctx context.Context, srv tmux.Server, w queue.Window, text, rules string) (bool, string) {
	scr, err := screenOf(ctx, srv, w, rules)
	if err != nil {
		return false, "its screen cannot be read: " + err.Error()
	}
	return broker.InputShows(scr, text)
}

// enterPause grows with the text: long pastes take agents longer to take in.
func (s *Service) enterPause(text string) time.Duration {
	return s.opts.Config.EnterPause() + time.Duration(len(text)/1024)*10*time.Millisecond
}

// DeliveryLease is how long a claim for delivery lasts; a claim older than this
// whose holder is gone is delivered again.
const DeliveryLease = 60 * time.Second

// wakeFor wakes the dispatcher for a new message unless its window is busy:
// the end of that delivery makes the dispatcher look at the window again.
func (s *Service) wakeFor(endpointID, target string) {
	if _, busy := s.busy.Load(store.DeliveryKey(endpointID, target)); !busy {
		s.wake()
	}
}

// wake nudges the dispatcher to look for work now.
func (s *Service) wake() {
	select {
	case s.wakeCh <- struct{}{}:
	default:
	}
}

type outcome struct {
	key string
}

// dispatch is the delivery loop: it recovers interrupted deliveries, expires
// ack deadlines, claims due messages (one delivery per window at a time, so
// writes into one terminal never interleave; a delivery takes the messages
// waiting for the window that may share one paste, queue.Batch) and delivers
// them, sleeping until the next thing is due or it is woken.
func (s *Service) dispatch(ctx context.Context) {
	busy := map[string]bool{}
	var claims spell
	done := make(chan outcome)
	inflight := 0
	defer func() {
		for ; inflight > 0; inflight-- {
			<-done
		}
	}()
	for {
		// Wake at a free window's next message; work that failed (the
		// database refused a read) is tried again after a short pause.
		var next time.Time
		earliest := func(t time.Time) {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		targets, err := s.store.Deliveries.QueuedTargets(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("reading the queue failed; will try again", "error", err.Error())
			earliest(s.opts.Now().Add(time.Second))
		}
		connected := s.connectedEndpoints(ctx)
		now := s.opts.Now()
		for _, t := range targets {
			if busy[t.Key()] || s.isStopping() {
				continue // a busy window wakes the loop when its delivery ends
			}
			// A window that cannot take text now (its tmux server is gone,
			// its agent exited, it shows a dialog) is not claimed: whatever
			// clears the reason wakes the loop.
			if !connected[t.EndpointID] || s.live.waitReason(t.Key()) != "" {
				continue
			}
			if t.NextAt.After(now) {
				earliest(t.NextAt)
				continue
			}
			ms, err := s.store.Deliveries.ClaimBatch(ctx, s.instance, DeliveryLease, t, s.opts.Config.MaxBatch())
			if err != nil {
				if ctx.Err() == nil {
					claims.failed(s.log, "claim failed; will try again", err)
					// Nothing else may wake the loop (no more sends): the
					// message waits only until the database takes writes again.
					earliest(now.Add(time.Second))
				}
				continue
			}
			claims.ok(s.log, "claiming messages again")
			if len(ms) == 0 {
				continue
			}
			key := t.Key()
			busy[key] = true
			s.busy.Store(key, true)
			inflight++
			go func() {
				// A delivery under way finishes even while the service stops
				// (shutdown waits for it within the grace period): cutting it
				// off mid-write would leave text without its Enter.
				s.deliver(context.WithoutCancel(ctx), ms)
				done <- outcome{key: key}
			}()
		}
		timer := s.timerUntil(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.wakeCh:
		case o := <-done:
			inflight--
			delete(busy, o.key)
			s.busy.Delete(o.key)
			s.wakeAcks() // the delivery may have set an ack deadline
		case <-timer.C:
		}
		timer.Stop()
	}
}

// connectedEndpoints are the ids of the endpoints whose tmux server runs.
func (s *Service) connectedEndpoints(ctx context.Context) map[string]bool {
	out := map[string]bool{}
	eps, err := s.knownEndpoints(ctx)
	if err != nil {
		s.log.Error("cannot read endpoints", "error", err.Error())
	}
	for _, ep := range eps {
		if ep.State == queue.Connected {
			out[ep.ID] = true
		}
	}
	return out
}

// rescueLeases is the lease rescuer: at start it returns to the queue the
// deliveries an earlier instance claimed and never finished, trying again
// each second until every one is back, then wakes the dispatcher and ends.
func (s *Service) rescueLeases(ctx context.Context) {
	for s.recoverClaims(ctx) != nil {
		select {
		case <-ctx.Done():
			return
		case <-time.After(time.Second):
		}
	}
	s.wake()
}

// expireAcksLoop is the ack expirer: it moves the messages whose ack
// deadline passed (redelivered or failed), then sleeps until the next
// deadline, or until a delivery ends (it may have set one); a failed
// database step is tried again a second later.
func (s *Service) expireAcksLoop(ctx context.Context) {
	for {
		next := s.opts.Now().Add(time.Second)
		if s.expireAcks(ctx) == nil {
			d, err := s.store.Deliveries.NextAckDeadline(ctx)
			switch {
			case err != nil && ctx.Err() == nil:
				s.log.Error("reading ack deadlines failed; will try again", "error", err.Error())
			case err == nil && d.IsZero():
				next = time.Time{}
			case err == nil:
				next = d
			}
		}
		timer := s.timerUntil(next)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.ackWakeCh:
		case <-timer.C:
		}
		timer.Stop()
	}
}

// timerUntil fires at next on the service's clock, or in an hour when
// there is no next (something else wakes the loop first).
func (s *Service) timerUntil(next time.Time) *time.Timer {
	wait := time.Hour
	if !next.IsZero() {
		wait = max(next.Sub(s.opts.Now()), time.Millisecond)
	}
	return time.NewTimer(wait)
}

// wakeAcks makes the ack expirer look at the deadlines again.
func (s *Service) wakeAcks() {
	select {
	case s.ackWakeCh <- struct{}{}:
	default:
	}
}

// recoverClaims returns to the queue every delivery claimed by an earlier
// instance (a crash or kill mid-delivery): the same id is delivered again.
// It fails if any claim could not be returned, so the dispatcher tries again.
func (s *Service) recoverClaims(ctx context.Context) error {
	ids, err := s.store.Deliveries.ExpiredLeases(ctx, s.instance)
	if err != nil {
		s.log.Error("cannot read interrupted deliveries; will try again", "error", err.Error())
		return err
	}
	if len(ids) == 0 {
		return nil
	}
	// All in one transaction: the messages of an interrupted batch come
	// back together and go in together again, never split by a claim
	// between them.
	now := s.opts.Now()
	failed, err := s.store.Deliveries.TransitionEach(ctx, ids, "delivery interrupted; redelivering", nil, func(m *queue.Message) error {
		return m.LeaseExpired(now)
	})
	if err != nil {
		s.log.Error("cannot return interrupted deliveries to the queue; will try again", "messages", len(ids), "error", err.Error())
		return err
	}
	for i, ferr := range failed {
		if ferr != nil && !errs.Is(ferr, errs.Conflict) {
			s.log.Warn("cannot return an interrupted delivery to the queue", "message", ids[i], "error", ferr.Error())
		}
	}
	return nil
}

// expireAcks redelivers (or fails) the messages whose ack deadline passed.
// It fails if any could not be moved, so the dispatcher tries again soon.
func (s *Service) expireAcks(ctx context.Context) error {
	ids, err := s.store.Deliveries.DueAcks(ctx)
	if err != nil {
		s.log.Error("cannot read ack deadlines; will try again", "error", err.Error())
		return err
	}
	t := timing(s.opts.Config)
	var errAll error
	if len(ids) > 0 {
		defer s.wake() // redelivered messages are queued again
	}
	for _, id := range ids {
		if _, err := s.store.Deliveries.Transition(ctx, id, "ack deadline passed", func(m *queue.Message) error {
			return m.AckDeadlinePassed(s.opts.Now(), t)
		}); err != nil && !errs.Is(err, errs.Conflict) {
			// Conflict: acked meanwhile (a late ack wins). Anything else is
			// the database failing; the deadline stays due and is tried again.
			s.log.Error("cannot expire an ack deadline; will try again", "message", id, "error", err.Error())
			errAll = errors.Join(errAll, err)
		}
	}
	return errAll
}

// deliver writes the claimed messages of one window (one message, or a
// batch: queue.BatchText, one paste and one Enter) and records the outcome
// for each message as if it had been delivered alone: the same injected_at,
// each with its own receipt and attempt count.
func (s *Service) deliver(ctx context.Context, ms []queue.Message) {
	t := timing(s.opts.Config)
	m := ms[0] // all are for its endpoint and target
	if !s.wakeStillCurrent(ctx, m) {
		return
	}
	ep, w, err := s.windowFor(ctx, m.EndpointID, m.Target)
	var wr Written
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, DeliveryLease/2)
		wr, err = s.opts.Writer.Write(wctx, ep, w, queue.BatchText(ms), s.confirmOf(ctx, ms))
		cancel()
	} else {
		wr = Written{Deferred: true, Reason: err.Error()}
	}
	if wr.Cancelled {
		// Cancelled while the writer waited for the window: the messages
		// say so already; nothing was written.
		s.log.Info("delivery not written: cancelled meanwhile", "message", m.ID, "reason", wr.Reason)
		return
	}
	if wr.Deferred {
		s.deferDelivery(ctx, ms, wr)
		return
	}
	// One time for the whole delivery: its messages come back due together
	// and go in together again.
	now := s.opts.Now()
	if wr.Held != "" {
		// The text sits in the agent's input box: nothing more is typed.
		reason := "Enter held (" + wr.Held + "): " + wr.Reason
		s.log.Warn("delivery held", "message", m.ID, "messages", len(ms), "target", m.Target, "held", wr.Held, "reason", wr.Reason)
		s.transitionEach(ctx, ms, reason, map[string]any{"held": wr.Held}, func(x *queue.Message) error {
			return x.HeldBack(now, reason)
		})
		s.keepWake(m, wr) // a person may press the Enter: the agent then takes it
		return
	}
	if err != nil {
		s.log.Warn("delivery failed", "message", m.ID, "messages", len(ms), "target", m.Target, "maybe_written", wr.MaybeWritten, "error", err.Error())
		s.transitionEach(ctx, ms, "write failed", nil, func(x *queue.Message) error {
			return x.WriteFailed(now, t, wr.MaybeWritten, err.Error())
		})
		return
	}
	// injected means written: the time is the writer's report of the write.
	at := wr.At
	if at.IsZero() {
		at = now
	}
	detail := wr.detail()
	if len(ms) > 1 {
		detail["batch_size"] = len(ms) // how many went in with the one Enter
	}
	s.transitionEach(ctx, ms, "written to terminal", detail, func(x *queue.Message) error {
		return x.Written(at, t)
	})
	s.keepWake(m, wr)
	s.log.Debug("delivered", "message", m.ID, "messages", len(ms), "target", m.Target, "attempt", m.Attempts)
}

// keepWake hands a wake written through a broker to the lease keeper: a
// wake goes alone, and its broker tells whether the agent took it.
func (s *Service) keepWake(m queue.Message, wr Written) {
	if leaseID, attempt, ok := store.WakeKey(m.IdempotencyKey); ok && m.SenderKind == queue.FromCoordination && wr.broker != nil {
		s.keeper.written(store.DeliveryKey(m.EndpointID, m.Target), m.Target, leaseID, attempt, wr.broker, wr.brokerStates, wr.Held != "")
	}
}

// transitionEach records one outcome for every message of a delivery in one
// transaction. A message that refuses it (acknowledged meanwhile: a late ack
// wins) keeps its state; if the database fails, the claims stay, expire, and
// the messages are delivered again.
func (s *Service) transitionEach(ctx context.Context, ms []queue.Message, reason string, detail map[string]any, change func(*queue.Message) error) {
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
		failed, err = s.store.Deliveries.TransitionEach(context.WithoutCancel(ctx), ids, reason, detail, change)
		if err == nil {
			break
		}
		refused.failed(s.log, "cannot record a delivery; will try again", err)
		select {
		case <-ctx.Done():
			s.log.Warn("delivery left unrecorded at stop; the next start delivers it again", "message", ids[0], "messages", len(ids), "reason", reason)
			return
		case <-time.After(time.Second):
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
func (s *Service) deferDelivery(ctx context.Context, ms []queue.Message, wr Written) {
	m := ms[0]
	s.log.Info("delivery waits", "message", m.ID, "messages", len(ms), "target", m.Target, "reason", wr.Reason)
	now := s.opts.Now() // one time: the batch is due again as a whole
	s.transitionEach(ctx, ms, "window cannot take it now: "+wr.Reason, nil, func(x *queue.Message) error {
		return x.Deferred(now, wr.Reason)
	})
	switch {
	case wr.broker != nil:
		s.holdIfStill(wr.broker, wr.brokerStates, wr.Reason)
	case wr.Path == "broker":
		s.setWait(fromBroker, m.EndpointID, m.Target, wr.Reason)
	case wr.NotAtPrompt:
		s.setWait(fromScreen, m.EndpointID, m.Target, wr.Reason)
		// A broker that attached while the pane was looked at has cleared
		// the screen's hold already, or is about to: it reports its own
		// agent, and a hold set after its attach would never be lifted
		// (an idle service lists no panes).
		if s.brokers.get(store.DeliveryKey(m.EndpointID, m.Target)) != nil {
			s.setWait(fromScreen, m.EndpointID, m.Target, "")
		}
	default:
		s.setWait(fromPane, m.EndpointID, m.Target, wr.Reason)
		s.live.requestList(m.EndpointID)
	}
	// The watcher may have seen the window change while these were being
	// written (the agent's pane died): it noted its reason on the messages
	// queued then, which these were not yet. They say the window's reason.
	if r := s.live.waitReason(store.DeliveryKey(m.EndpointID, m.Target)); r != "" && r != wr.Reason {
		if err := s.store.Deliveries.NoteWaiting(context.WithoutCancel(ctx), m.EndpointID, m.Target, r); err != nil {
			s.log.Error("cannot note why messages wait", "repo", m.Target, "error", err.Error())
		}
	}
}

func (s *Service) windowFor(ctx context.Context, endpointID, repo string) (queue.Endpoint, queue.Window, error) {
	eps, err := s.knownEndpoints(ctx)
	if err != nil {
		return queue.Endpoint{}, queue.Window{}, err
	}
	for _, ep := range eps {
		if ep.ID != endpointID {
			continue
		}
		for _, w := range ep.Windows {
			if w.Repo == repo {
				return ep, w, nil
			}
		}
	}
	return queue.Endpoint{}, queue.Window{}, errNoWindow
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
func (s *Service) wakeStillCurrent(ctx context.Context, m queue.Message) bool {
	leaseID, attempt, ok := store.WakeKey(m.IdempotencyKey)
	if m.SenderKind != queue.FromCoordination || !ok {
		return true
	}
	actx, cancel := context.WithTimeout(ctx, engineAskTimeout)
	res, err := engineclient.New(s.opts.Engine).LeaseCurrent(actx, engineapi.LeaseArgs{LeaseID: leaseID, Attempt: attempt})
	cancel()
	now := s.opts.Now()
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
func (s *Service) confirmOf(ctx context.Context, ms []queue.Message) *Confirm {
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
func (s *Service) stillDelivering(ctx context.Context, ids []string) (bool, string) {
	for _, id := range ids {
		m, err := s.store.Deliveries.Get(ctx, id)
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
func (s *Service) deliveryCurrent(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
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
