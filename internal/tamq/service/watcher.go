package service

import (
	"context"
	"database/sql"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// How often the watcher looks at the terminals. A dead tmux server is seen
// by its pid alone, which costs no process; listing windows costs one tmux
// call per server, so it runs less often, and at once when something asks
// (a write refused, a broker gone, a window registered).
const (
	watchInterval = time.Second
	listInterval  = 5 * time.Second
	// brokeredListInterval is for a server whose every window has a live
	// broker session: its brokers already report what a listing would find
	// (an agent that exits or a window that closes ends the session, which
	// lists at once), so the listing only backs them up. Twenty servers
	// listed every five seconds cost the idle service about 0.8% of a CPU
	// in process starts (docs/performance.md, "Scale").
	brokeredListInterval = 30 * time.Second
	listTimeout          = 5 * time.Second
)

// watcher is the endpoint watcher: it keeps the live view fresh from tmux,
// notices tmux servers that are gone and come back, and moves messages
// stranded on a gone endpoint to its replacement. Others ask it to list an
// endpoint now (requestList) and tell it why a window waits (setWait).
type watcher struct {
	log           *slog.Logger
	clock         clock.Clock
	config        *config.Loaded
	reader        *sql.DB
	deliveries    *store.Deliveries
	endpointTable *store.EndpointTable
	endpoints     endpointRecords
	// panes is the live view the watcher keeps fresh.
	panes panes
	// brokers are the live broker sessions: a brokered window is listed
	// less often.
	brokers watchedBrokers
	// dispatch wakes the dispatcher (a window can take deliveries again,
	// stranded messages moved); attach has the endpoints handed to
	// coordination-engine again (an agent started or exited).
	dispatch, attach wakeup.Signal

	mu sync.Mutex
	// serverStart is the start time of each connected endpoint's tmux server
	// process, recorded once tmux itself confirmed the pid: a pid that later
	// names another process is a server that is gone.
	serverStart map[string]uint64
	listed      map[string]time.Time // endpoint id: when its windows were listed
	// stopped holds the endpoints disconnected because their tmux server was
	// stopped (SIGSTOP, a job-control stop): they are asked again as soon as
	// it runs, not a list interval later.
	stopped map[string]bool
	// rebind asks the watcher to move messages stranded on a gone endpoint
	// to its replacement.
	rebind bool
	// listDue are the endpoints the watcher lists at its next turn, whatever
	// their interval; listAll, every one.
	listDue map[string]bool
	listAll bool
	listNow wakeup.Signal
}

// endpointRecords are the recorded endpoints, and who changes them says so
// (endpointBook).
type endpointRecords interface {
	known(ctx context.Context) ([]queue.Endpoint, error)
	changed()
}

// panes is the live view of the windows' panes that the watcher keeps.
type panes interface {
	setWait(src waitSource, key, reason string) (before, after string)
	setAgent(src waitSource, key string, running *bool) (changed bool)
	screenWaiting() map[string]bool
	panePID(endpointID, paneID string) (int, bool)
	addPanes(endpointID, socket string, wins []tmux.Window)
	forgetPanes(endpointID string)
}

// watchedBrokers are the live broker sessions (brokerTable).
type watchedBrokers interface {
	get(key string) *brokerConn
	isLive(endpointID, repo, paneID string) bool
}

// requestList makes the watcher list the windows of the given endpoints
// now, or of every connected one when none is given. What happened on one
// tmux server is looked up on that one alone: with twenty servers, a
// window opened or a broker gone on one would otherwise cost twenty tmux
// processes.
func (s *watcher) requestList(endpointIDs ...string) {
	s.mu.Lock()
	if len(endpointIDs) == 0 {
		s.listAll = true
	}
	for _, id := range endpointIDs {
		s.listDue[id] = true
	}
	s.mu.Unlock()
	s.listNow.Wake()
}

// requestRebind makes the watcher look for stranded messages at its next
// turn, listing the given endpoints (all when none is given) first.
func (s *watcher) requestRebind(endpointIDs ...string) {
	s.mu.Lock()
	s.rebind = true
	s.mu.Unlock()
	s.requestList(endpointIDs...)
}

// setWait records why a window cannot take deliveries now, or that it can
// again ("" reason): the dispatcher then claims its messages. A new reason is
// noted on the messages waiting for the window, so history says why they wait.
func (s *watcher) setWait(src waitSource, endpointID, repo, reason string) {
	before, after := s.panes.setWait(src, store.DeliveryKey(endpointID, repo), reason)
	switch {
	case after == before:
	case after == "":
		s.dispatch.Wake()
	default:
		if err := s.deliveries.NoteWaiting(context.Background(), endpointID, repo, after); err != nil {
			s.log.Error("cannot note why messages wait", "repo", repo, "error", err.Error())
		}
	}
}

// noteAgent records whether an agent runs in a window, and hands the
// endpoints to coordination-engine again when that changed: the engine
// offers work only to a window with an agent.
func (s *watcher) noteAgent(src waitSource, endpointID, repo string, running *bool) {
	if s.panes.setAgent(src, store.DeliveryKey(endpointID, repo), running) {
		s.attach.Wake()
	}
}

// run keeps the live view fresh until ctx ends.
func (s *watcher) run(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case <-s.clock.After(watchInterval):
		case <-s.listNow.C():
		}
		s.watchOnce(ctx, s.clock.Now())
	}
}

// watchOnce notices tmux servers that are gone (their endpoint becomes
// disconnected: sends to repos only there are refused, deliveries wait),
// refreshes the windows of the live ones, and moves messages stranded on a
// gone endpoint to its replacement. now is the time of this turn, a
// parameter so that a test can step through the list intervals.
func (s *watcher) watchOnce(ctx context.Context, now time.Time) {
	s.mu.Lock()
	all, asked := s.listAll, s.listDue
	s.listAll, s.listDue = false, map[string]bool{}
	s.mu.Unlock()
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		if ctx.Err() == nil { // a shutdown cancels the read: no error of its own
			s.log.Error("cannot read endpoints", "error", err.Error())
		}
		// What was asked is still owed, at the next tick.
		s.mu.Lock()
		s.listAll = s.listAll || all
		for id := range asked {
			s.listDue[id] = true
		}
		s.mu.Unlock()
		return
	}
	for _, ep := range eps {
		if ep.State != queue.Connected {
			s.maybeReconnect(ctx, ep, now)
			continue
		}
		if reason := s.serverGone(ep); reason != "" {
			s.disconnect(ctx, ep, reason)
			continue
		}
		interval := listInterval
		if s.allBrokered(ep) {
			interval = brokeredListInterval
		}
		s.mu.Lock()
		due := all || asked[ep.ID] || now.Sub(s.listed[ep.ID]) >= interval
		s.mu.Unlock()
		if due {
			s.list(ctx, ep, now)
		}
	}
	s.mu.Lock()
	rebind := s.rebind
	s.rebind = false
	s.mu.Unlock()
	if rebind {
		if err := s.rebindStranded(ctx); err != nil {
			s.log.Error("cannot move messages to a replacement endpoint; will try again", "error", err.Error())
			s.requestRebind()
		}
	}
}

// allBrokered says whether every window of the endpoint has a live broker
// session (an endpoint without windows has nothing to watch either).
func (s *watcher) allBrokered(ep queue.Endpoint) bool {
	for _, w := range ep.Windows {
		if !s.brokers.isLive(ep.ID, w.Repo, w.PaneID) {
			return false
		}
	}
	return true
}

// askTmux bounds one question to a tmux server: a server that hangs must not
// hang the service, and one that does not answer in time counts as gone.
func askTmux(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, listTimeout)
}

// maybeReconnect connects a disconnected endpoint again when its very tmux
// server answers once more (it hung for a while), looked at once per list
// interval; an endpoint whose server process is gone costs nothing.
func (s *watcher) maybeReconnect(ctx context.Context, ep queue.Endpoint, now time.Time) {
	if proc.Exited(ep.ServerPID) {
		return
	}
	st, err := proc.ReadStat(ep.ServerPID)
	if err == nil && isStopped(st) {
		return
	}
	s.mu.Lock()
	due := now.Sub(s.listed[ep.ID]) >= listInterval || s.stopped[ep.ID]
	delete(s.stopped, ep.ID)
	if due {
		s.listed[ep.ID] = now
	}
	s.mu.Unlock()
	if !due {
		return
	}
	askCtx, cancel := askTmux(ctx)
	pid, err := (tmux.Server{Socket: ep.TmuxSocket}).PID(askCtx)
	cancel()
	if err != nil || pid != ep.ServerPID {
		return
	}
	if err := s.endpointTable.SetEndpointState(ctx, ep.ID, queue.Connected, "its tmux server answers again"); err != nil {
		s.log.Error("cannot record an endpoint back", "endpoint", ep.ID, "error", err.Error())
		return
	}
	s.log.Info("endpoint connected again", "endpoint", ep.ID)
	s.endpoints.changed()
	s.requestList(ep.ID)
}

// serverGone says why an endpoint's tmux server is gone, or "" while it runs.
func (s *watcher) serverGone(ep queue.Endpoint) string {
	if proc.Exited(ep.ServerPID) {
		return fmt.Sprintf("its tmux server (pid %d) has exited", ep.ServerPID)
	}
	st, err := proc.ReadStat(ep.ServerPID)
	s.mu.Lock()
	defer s.mu.Unlock()
	start, ok := s.serverStart[ep.ID]
	switch {
	case !ok || err != nil:
	case st.StartTime != start:
		return fmt.Sprintf("its tmux server (pid %d) has exited; the pid now names another process", ep.ServerPID)
	case isStopped(st):
		// A stopped server would not answer; waiting for a list to time
		// out would only delay what the kernel already says.
		s.stopped[ep.ID] = true
		return fmt.Sprintf("its tmux server (pid %d) is stopped", ep.ServerPID)
	}
	return ""
}

// isStopped says whether a process is stopped by a signal or a tracer.
func isStopped(st proc.Stat) bool { return st.State == 'T' || st.State == 't' }

// list asks the endpoint's tmux server for its windows and derives, for each
// registered window, whether it can take deliveries.
func (s *watcher) list(ctx context.Context, ep queue.Endpoint, now time.Time) {
	srv := tmux.Server{Socket: ep.TmuxSocket}
	askCtx, cancel := askTmux(ctx)
	pid, wins, err := srv.Snapshot(askCtx)
	cancel()
	switch {
	case errs.Is(err, errs.Unavailable), errs.Is(err, errs.Timeout):
		s.disconnect(ctx, ep, "its tmux server does not answer: "+err.Error())
		return
	case err != nil:
		s.log.Warn("cannot list the windows of an endpoint", "endpoint", ep.ID, "error", err.Error())
		return
	case pid != ep.ServerPID:
		s.disconnect(ctx, ep, fmt.Sprintf("another tmux server (pid %d) now runs on its socket", pid))
		return
	}
	st, statErr := proc.ReadStat(pid)
	s.mu.Lock()
	s.listed[ep.ID] = now
	if statErr == nil {
		s.serverStart[ep.ID] = st.StartTime
	}
	s.mu.Unlock()
	s.panes.addPanes(ep.ID, ep.TmuxSocket, wins)
	byPane := map[string]tmux.Window{}
	for _, w := range wins {
		byPane[w.PaneID] = w
	}
	held := s.panes.screenWaiting()
	for _, w := range ep.Windows {
		reason := ""
		tw, ok := byPane[w.PaneID]
		switch {
		case !ok:
			reason = "its window is closed"
		case tw.Repo != w.Repo:
			reason = fmt.Sprintf("its window is no longer marked for %s", w.Repo)
		case tw.Dead:
			reason = paneExited + queue.ExitText(tw.DeadStatus)
		}
		s.recordEnd(ctx, ep, w, tw, ok)
		s.setWait(fromPane, ep.ID, w.Repo, reason)
		key := store.DeliveryKey(ep.ID, w.Repo)
		brokered := s.brokers.get(key) != nil
		if !brokered {
			// Whether an agent runs, as the pane's process shows it (a
			// broker reports its own). What the process table cannot tell
			// yet (a broker that has not started its agent) is said as
			// nothing, not as "no agent": the engine would wait for nothing.
			v, known := paneVerdict(tw.PanePID, s.config.Delivery.AgentPrograms)
			var running *bool
			switch {
			case reason != "":
				running = new(bool)
			case known:
				running = &v.Running
			}
			s.noteAgent(fromPane, ep.ID, w.Repo, running)
			// A window held to wait for its broker (waitingForBroker) whose
			// pane runs none any more will hear from no broker.
			if reason != "" || !isBroker(tw.PanePID) {
				s.setWait(fromBroker, ep.ID, w.Repo, "")
			}
		}
		// A window without a broker held by what its pane showed is looked
		// at again; a broker reports its own agent.
		if held[key] && reason == "" {
			why := ""
			if !brokered {
				if ok, r := paneReady(ctx, srv, w, tw.PanePID, s.config.Delivery.AgentPrograms); !ok {
					why = r
				}
			}
			s.setWait(fromScreen, ep.ID, w.Repo, why)
		}
	}
}

// windowEnd is how the agent of a recorded window ended, as its tmux server
// lists it now (tw, found or not): its pane dead, with its exit status, or
// its window closed; "" while it runs. A window no longer marked for the
// repo says nothing of its agent: the recorded end stays.
func windowEnd(w queue.Window, tw tmux.Window, found bool) (end queue.AgentEnd, status int, known bool) {
	switch {
	case !found:
		return queue.WindowClosed, -1, true
	case tw.Repo != w.Repo:
		return w.Ended, w.ExitStatus, false
	case tw.Dead:
		return queue.AgentExited, tw.DeadStatus, true
	}
	return "", -1, true
}

// recordEnd keeps the window's recorded end (how its agent ended) true to
// what its tmux server lists: a restart reopens only windows whose agent
// was running (restore.go). Only a change is written.
func (s *watcher) recordEnd(ctx context.Context, ep queue.Endpoint, w queue.Window, tw tmux.Window, found bool) {
	end, status, known := windowEnd(w, tw, found)
	if !known || end == w.Ended && status == w.ExitStatus {
		return
	}
	changed, err := s.endpointTable.SetWindowEnd(ctx, ep.ID, w.Repo, w.PaneID, end, status)
	if err != nil {
		s.log.Error("cannot record how a window's agent ended", "repo", w.Repo, "error", err.Error())
		return
	}
	if changed {
		if end != "" {
			s.log.Info("a window's agent ended", "repo", w.Repo, "endpoint", ep.ID, "how", queue.Window{Ended: end, ExitStatus: status}.EndText())
		}
		s.endpoints.changed()
	}
}

// recordEnds lists each connected endpoint's windows once more and records
// how their agents ended: the service's last look as it stops, so that the
// next start knows which agents ran (a tmux server gone by then, at a
// reboot, shows nothing). Each server is given a short while: a hung one
// must not hold the shutdown.
func (s *watcher) recordEnds(ctx context.Context) {
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		s.log.Error("cannot read endpoints", "error", err.Error())
		return
	}
	for _, ep := range eps {
		if ep.State != queue.Connected {
			continue
		}
		askCtx, cancel := context.WithTimeout(ctx, lastLookTimeout)
		pid, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
		cancel()
		if err != nil || pid != ep.ServerPID {
			continue
		}
		byPane := map[string]tmux.Window{}
		for _, w := range wins {
			byPane[w.PaneID] = w
		}
		for _, w := range ep.Windows {
			tw, ok := byPane[w.PaneID]
			s.recordEnd(ctx, ep, w, tw, ok)
		}
	}
}

// lastLookTimeout bounds recordEnds' question to one tmux server.
const lastLookTimeout = time.Second

// disconnect records that an endpoint's tmux server is gone.
func (s *watcher) disconnect(ctx context.Context, ep queue.Endpoint, reason string) {
	if err := s.endpointTable.SetEndpointState(ctx, ep.ID, queue.Disconnected, reason); err != nil {
		// The endpoint stays connected in the database; the next turn tries again.
		s.log.Error("cannot record a gone endpoint", "endpoint", ep.ID, "error", err.Error())
		return
	}
	s.log.Warn("endpoint disconnected", "endpoint", ep.ID, "reason", reason)
	s.panes.forgetPanes(ep.ID)
	s.mu.Lock()
	delete(s.serverStart, ep.ID)
	delete(s.listed, ep.ID)
	s.rebind = true
	s.mu.Unlock()
	s.endpoints.changed()
}

// rebindStranded moves the undelivered messages of each gone endpoint to its
// replacement: the one connected endpoint on the same tmux socket (the
// server was restarted there). Only the repos the replacement hosts move;
// nothing moves while the old endpoint is connected.
func (s *watcher) rebindStranded(ctx context.Context) error {
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		return err
	}
	moved := 0
	for _, old := range eps {
		if old.State == queue.Connected {
			continue
		}
		var repl []queue.Endpoint
		for _, ep := range eps {
			if ep.State == queue.Connected && ep.TmuxSocket == old.TmuxSocket {
				repl = append(repl, ep)
			}
		}
		if len(repl) != 1 {
			continue
		}
		pending, err := store.PendingOn(ctx, s.reader, old.ID)
		if err != nil {
			return err
		}
		var repos []string
		for _, w := range repl[0].Windows {
			if pending[w.Repo] > 0 {
				repos = append(repos, w.Repo)
			}
		}
		n, err := s.endpointTable.Rebind(ctx, old.ID, repl[0].ID, repos)
		if err != nil {
			return err
		}
		if n > 0 {
			s.log.Info("messages moved to the replacement endpoint", "from", old.ID, "to", repl[0].ID, "messages", n)
			moved += n
		}
	}
	if moved > 0 {
		s.dispatch.Wake()
	}
	return nil
}

// paneAgent is the TmuxWriter's look at a window's pane: whether an agent
// runs there, with the screen rules that apply. The pane's process is the
// one the watcher last listed, or, for a window opened since, tmux's answer
// now.
func (s *watcher) paneAgent(ctx context.Context, ep queue.Endpoint, w queue.Window) program.Verdict {
	v, _ := paneVerdict(s.panePID(ctx, ep, w), s.config.Delivery.AgentPrograms)
	return v
}

// panePID is the process tmux runs in the window's live pane, 0 when
// there is none or tmux cannot say.
func (s *watcher) panePID(ctx context.Context, ep queue.Endpoint, w queue.Window) int {
	if pid, ok := s.panes.panePID(ep.ID, w.PaneID); ok {
		return pid
	}
	askCtx, cancel := askTmux(ctx)
	_, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
	cancel()
	if err != nil {
		return 0
	}
	pid := 0
	for _, tw := range wins {
		if tw.PaneID == w.PaneID && tw.Repo == w.Repo && !tw.Dead {
			pid = tw.PanePID
		}
	}
	return pid
}

// paneRunsBroker says whether the window's pane runs tamq's broker.
func (s *watcher) paneRunsBroker(ctx context.Context, ep queue.Endpoint, w queue.Window) bool {
	return isBroker(s.panePID(ctx, ep, w))
}

// isBroker says whether process pid is tamq's broker.
func isBroker(pid int) bool {
	if pid <= 0 {
		return false
	}
	argv, err := proc.Cmdline(pid)
	if err != nil {
		return false
	}
	_, ok := program.BrokerChild(argv)
	return ok
}
