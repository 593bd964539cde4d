package service

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tmux"
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

// live is the service's view of the terminals it delivers into, kept fresh
// by the watcher: which tmux servers still run, which process runs in which
// marked pane, and why a window cannot take a delivery now.
type live struct {
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
	// panes are the processes of the marked, live panes, by pid.
	panes map[int]paneSeen
	// senders are recent answers to "which window does this process run
	// in", by pid.
	senders map[int]senderSeen
	// paneHealth says why a window cannot take a delivery, as tmux shows it
	// (the agent exited, the window closed); brokerWait why its broker's agent
	// is not at its input prompt; screenWait why the program of a window
	// without a broker is not, as its pane shows. All by delivery key.
	paneHealth map[string]string
	brokerWait map[string]string
	screenWait map[string]string
	// brokerAgent and paneAgent say whether an agent is the foreground
	// program of a window, by delivery key: as its broker reports it, and
	// as its pane's process shows it (for a window without a broker
	// session). The broker's word wins; coordination-engine hears it.
	brokerAgent map[string]bool
	paneAgent   map[string]bool
	// rebind asks the watcher to move messages stranded on a gone endpoint
	// to its replacement.
	rebind bool
	// listDue are the endpoints the watcher lists at its next turn, whatever
	// their interval; listAll, every one.
	listDue map[string]bool
	listAll bool
	listNow chan struct{}
}

// senderSeen is what paneOf found for a process, kept for senderTTL.
type senderSeen struct {
	pane     paneSeen
	self, ok bool
	start    uint64
	until    time.Time
}

const senderTTL = time.Second

func (l *live) cachedSender(st proc.Stat) (senderSeen, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	c, hit := l.senders[st.PID]
	return c, hit && c.start == st.StartTime && time.Now().Before(c.until)
}

func (l *live) cacheSender(st proc.Stat, c senderSeen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.senders) > 1000 {
		clear(l.senders) // many short-lived clients: start afresh
	}
	c.start, c.until = st.StartTime, time.Now().Add(senderTTL)
	l.senders[st.PID] = c
}

// paneSeen is the process running in a pane tamq marked for a repo.
type paneSeen struct {
	endpointID string
	socket     string
	paneID     string
	repo       string
	pid        int
	start      uint64 // the process's start time: the pid alone may be reused
}

func newLive() *live {
	return &live{
		serverStart: map[string]uint64{}, listed: map[string]time.Time{}, stopped: map[string]bool{},
		panes: map[int]paneSeen{}, senders: map[int]senderSeen{}, paneHealth: map[string]string{}, brokerWait: map[string]string{}, screenWait: map[string]string{},
		brokerAgent: map[string]bool{}, paneAgent: map[string]bool{},
		listDue: map[string]bool{}, listNow: make(chan struct{}, 1),
	}
}

// requestList makes the watcher list the windows of the given endpoints
// now, or of every connected one when none is given. What happened on one
// tmux server is looked up on that one alone: with twenty servers, a
// window opened or a broker gone on one would otherwise cost twenty tmux
// processes.
func (l *live) requestList(endpointIDs ...string) {
	l.mu.Lock()
	if len(endpointIDs) == 0 {
		l.listAll = true
	}
	for _, id := range endpointIDs {
		l.listDue[id] = true
	}
	l.mu.Unlock()
	select {
	case l.listNow <- struct{}{}:
	default:
	}
}

// requestRebind makes the watcher look for stranded messages at its next
// turn, listing the given endpoints (all when none is given) first.
func (l *live) requestRebind(endpointIDs ...string) {
	l.mu.Lock()
	l.rebind = true
	l.mu.Unlock()
	l.requestList(endpointIDs...)
}

// waitReason is why the window of key cannot take a delivery now, or "".
func (l *live) waitReason(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.reasonOf(key)
}

// reasonOf is the window's wait reason; mu is held.
func (l *live) reasonOf(key string) string {
	for _, m := range []map[string]string{l.paneHealth, l.brokerWait, l.screenWait} {
		if r := m[key]; r != "" {
			return r
		}
	}
	return ""
}

// screenWaiting lists the keys of windows held by their pane's screen.
func (l *live) screenWaiting() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	out := map[string]bool{}
	for k := range l.screenWait {
		out[k] = true
	}
	return out
}

// Where a window's wait reason comes from.
type waitSource int

const (
	fromPane   waitSource = iota // tmux: the agent exited, the window closed
	fromBroker                   // the broker: its agent is not at its prompt
	fromScreen                   // the pane of a window without a broker: not at its prompt
)

// setWait records one source's reason (or "" when it no longer holds) and
// returns the window's overall wait reason before and after.
func (l *live) setWait(src waitSource, key, reason string) (before, after string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before = l.reasonOf(key)
	m := map[waitSource]map[string]string{fromPane: l.paneHealth, fromBroker: l.brokerWait, fromScreen: l.screenWait}[src]
	if reason == "" {
		delete(m, key)
	} else {
		m[key] = reason
	}
	return before, l.reasonOf(key)
}

// setWait records why a window cannot take deliveries now, or that it can
// again ("" reason): the dispatcher then claims its messages. A new reason is
// noted on the messages waiting for the window, so history says why they wait.
func (s *Service) setWait(src waitSource, endpointID, repo, reason string) {
	before, after := s.live.setWait(src, store.DeliveryKey(endpointID, repo), reason)
	switch {
	case after == before:
	case after == "":
		s.wake()
	default:
		if err := s.store.Deliveries.NoteWaiting(context.Background(), endpointID, repo, after); err != nil {
			s.log.Error("cannot note why messages wait", "repo", repo, "error", err.Error())
		}
	}
}

// agentRunning says whether an agent is the window's foreground program;
// nil when nothing said yet.
func (l *live) agentRunning(key string) *bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.agentOf(key)
}

// agentOf is agentRunning with mu held.
func (l *live) agentOf(key string) *bool {
	if v, ok := l.brokerAgent[key]; ok {
		return &v
	}
	if v, ok := l.paneAgent[key]; ok {
		return &v
	}
	return nil
}

// setAgent records what one source (fromBroker or fromPane) says of the
// window's agent (nil: it says nothing any more), and reports whether the
// window's overall answer changed as the engine reads it (nothing said
// counts as running).
func (l *live) setAgent(src waitSource, key string, running *bool) (changed bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	before := l.agentOf(key)
	m := l.paneAgent
	if src == fromBroker {
		m = l.brokerAgent
	}
	if running == nil {
		delete(m, key)
	} else {
		m[key] = *running
	}
	return runs(before) != runs(l.agentOf(key))
}

// runs reads an agent_running answer as the engine does: unknown is running.
func runs(agent *bool) bool { return agent == nil || *agent }

// noteAgent records whether an agent runs in a window, and hands the
// endpoints to coordination-engine again when that changed: the engine
// offers work only to a window with an agent.
func (s *Service) noteAgent(src waitSource, endpointID, repo string, running *bool) {
	if s.live.setAgent(src, store.DeliveryKey(endpointID, repo), running) && s.engineLink != nil {
		s.engineLink.requestAttach()
	}
}

// panePID is the process of a pane the watcher knows, by its id.
func (l *live) panePID(endpointID, paneID string) (int, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pid, p := range l.panes {
		if p.endpointID == endpointID && p.paneID == paneID {
			return pid, true
		}
	}
	return 0, false
}

// addPane records a verified pane process (from a listing or a broker's
// session).
func (l *live) addPane(p paneSeen) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.panes[p.pid] = p
}

// match finds the marked pane whose process is the first of chain (a
// process and its ancestors, nearest first) that runs in one, and says
// whether that is the process itself.
func (l *live) match(chain []proc.Stat) (p paneSeen, self, ok bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for i, st := range chain {
		if p, ok := l.panes[st.PID]; ok && p.start == st.StartTime {
			return p, i == 0, true
		}
	}
	return paneSeen{}, false, false
}

// watch keeps the live view fresh until ctx ends.
func (s *Service) watch(ctx context.Context) {
	tick := time.NewTicker(watchInterval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.live.listNow:
		}
		s.watchOnce(ctx, time.Now())
	}
}

// watchOnce notices tmux servers that are gone (their endpoint becomes
// disconnected: sends to repos only there are refused, deliveries wait),
// refreshes the windows of the live ones, and moves messages stranded on a
// gone endpoint to its replacement. now is the time of this turn, a
// parameter so that a test can step through the list intervals.
func (s *Service) watchOnce(ctx context.Context, now time.Time) {
	l := s.live
	l.mu.Lock()
	all, asked := l.listAll, l.listDue
	l.listAll, l.listDue = false, map[string]bool{}
	l.mu.Unlock()
	eps, err := s.knownEndpoints(ctx)
	if err != nil {
		s.log.Error("cannot read endpoints", "error", err.Error())
		// What was asked is still owed, at the next tick.
		l.mu.Lock()
		l.listAll = l.listAll || all
		for id := range asked {
			l.listDue[id] = true
		}
		l.mu.Unlock()
		return
	}
	for _, ep := range eps {
		if ep.State != queue.Connected {
			s.maybeReconnect(ctx, ep, now)
			continue
		}
		if reason := s.live.serverGone(ep); reason != "" {
			s.disconnect(ctx, ep, reason)
			continue
		}
		interval := listInterval
		if s.allBrokered(ep) {
			interval = brokeredListInterval
		}
		s.live.mu.Lock()
		due := all || asked[ep.ID] || now.Sub(s.live.listed[ep.ID]) >= interval
		s.live.mu.Unlock()
		if due {
			s.list(ctx, ep, now)
		}
	}
	s.live.mu.Lock()
	rebind := s.live.rebind
	s.live.rebind = false
	s.live.mu.Unlock()
	if rebind {
		if err := s.rebindStranded(ctx); err != nil {
			s.log.Error("cannot move messages to a replacement endpoint; will try again", "error", err.Error())
			s.live.requestRebind()
		}
	}
}

// allBrokered says whether every window of the endpoint has a live broker
// session (an endpoint without windows has nothing to watch either).
func (s *Service) allBrokered(ep queue.Endpoint) bool {
	for _, w := range ep.Windows {
		if !s.brokerLive(ep.ID, w.Repo, w.PaneID) {
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
func (s *Service) maybeReconnect(ctx context.Context, ep queue.Endpoint, now time.Time) {
	if proc.Exited(ep.ServerPID) {
		return
	}
	st, err := proc.ReadStat(ep.ServerPID)
	if err == nil && isStopped(st) {
		return
	}
	l := s.live
	l.mu.Lock()
	due := now.Sub(l.listed[ep.ID]) >= listInterval || l.stopped[ep.ID]
	delete(l.stopped, ep.ID)
	if due {
		l.listed[ep.ID] = now
	}
	l.mu.Unlock()
	if !due {
		return
	}
	askCtx, cancel := askTmux(ctx)
	pid, err := (tmux.Server{Socket: ep.TmuxSocket}).PID(askCtx)
	cancel()
	if err != nil || pid != ep.ServerPID {
		return
	}
	if err := s.store.Endpoints.SetEndpointState(ctx, ep.ID, queue.Connected, "its tmux server answers again"); err != nil {
		s.log.Error("cannot record an endpoint back", "endpoint", ep.ID, "error", err.Error())
		return
	}
	s.log.Info("endpoint connected again", "endpoint", ep.ID)
	s.endpointsChanged()
	s.live.requestList(ep.ID)
}

// serverGone says why an endpoint's tmux server is gone, or "" while it runs.
func (l *live) serverGone(ep queue.Endpoint) string {
	if proc.Exited(ep.ServerPID) {
		return fmt.Sprintf("its tmux server (pid %d) has exited", ep.ServerPID)
	}
	st, err := proc.ReadStat(ep.ServerPID)
	l.mu.Lock()
	defer l.mu.Unlock()
	start, ok := l.serverStart[ep.ID]
	switch {
	case !ok || err != nil:
	case st.StartTime != start:
		return fmt.Sprintf("its tmux server (pid %d) has exited; the pid now names another process", ep.ServerPID)
	case isStopped(st):
		// A stopped server would not answer; waiting for a list to time
		// out would only delay what the kernel already says.
		l.stopped[ep.ID] = true
		return fmt.Sprintf("its tmux server (pid %d) is stopped", ep.ServerPID)
	}
	return ""
}

// isStopped says whether a process is stopped by a signal or a tracer.
func isStopped(st proc.Stat) bool { return st.State == 'T' || st.State == 't' }

// list asks the endpoint's tmux server for its windows and derives, for each
// registered window, whether it can take deliveries.
func (s *Service) list(ctx context.Context, ep queue.Endpoint, now time.Time) {
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
	l := s.live
	l.mu.Lock()
	l.listed[ep.ID] = now
	if statErr == nil {
		l.serverStart[ep.ID] = st.StartTime
	}
	l.mu.Unlock()
	s.live.addPanes(ep.ID, ep.TmuxSocket, wins)
	byPane := map[string]tmux.Window{}
	for _, w := range wins {
		byPane[w.PaneID] = w
	}
	held := s.live.screenWaiting()
	for _, w := range ep.Windows {
		reason := ""
		tw, ok := byPane[w.PaneID]
		switch {
		case !ok:
			reason = "its window is closed"
		case tw.Repo != w.Repo:
			reason = fmt.Sprintf("its window is no longer marked for %s", w.Repo)
		case tw.Dead:
			reason = "the agent in its window has exited"
		}
		s.setWait(fromPane, ep.ID, w.Repo, reason)
		key := store.DeliveryKey(ep.ID, w.Repo)
		brokered := s.brokers.get(key) != nil
		if !brokered {
			// Whether an agent runs, as the pane's process shows it (a
			// broker reports its own). What the process table cannot tell
			// yet (a broker that has not started its agent) is said as
			// nothing, not as "no agent": the engine would wait for nothing.
			v, known := paneVerdict(tw.PanePID, s.agentPrograms())
			var running *bool
			switch {
			case reason != "":
				running = new(bool)
			case known:
				running = &v.Running
			}
			s.noteAgent(fromPane, ep.ID, w.Repo, running)
		}
		// A window without a broker held by what its pane showed is looked
		// at again; a broker reports its own agent.
		if held[key] && reason == "" {
			why := ""
			if !brokered {
				if ok, r := paneReady(ctx, srv, w, tw.PanePID, s.agentPrograms()); !ok {
					why = r
				}
			}
			s.setWait(fromScreen, ep.ID, w.Repo, why)
		}
	}
}

// addPanes records the processes of the live, marked panes of one server,
// replacing what was known of its panes. A pane process already known keeps
// its start time: tmux still runs it in that pane, so it is the same process
// (and the listing reads no file per window).
func (l *live) addPanes(endpointID, socket string, wins []tmux.Window) {
	l.mu.Lock()
	old := map[int]paneSeen{}
	for pid, p := range l.panes {
		if p.endpointID == endpointID {
			old[pid] = p
			delete(l.panes, pid)
		}
	}
	l.mu.Unlock()
	for _, w := range wins {
		if w.Repo == "" || w.Dead {
			continue
		}
		p := paneSeen{endpointID: endpointID, socket: socket, paneID: w.PaneID, repo: w.Repo, pid: w.PanePID}
		if o, ok := old[w.PanePID]; ok && o.paneID == w.PaneID {
			p.start = o.start
		} else if st, err := proc.ReadStat(w.PanePID); err == nil {
			p.start = st.StartTime
		} else {
			continue
		}
		l.addPane(p)
	}
}

// disconnect records that an endpoint's tmux server is gone.
func (s *Service) disconnect(ctx context.Context, ep queue.Endpoint, reason string) {
	if err := s.store.Endpoints.SetEndpointState(ctx, ep.ID, queue.Disconnected, reason); err != nil {
		// The endpoint stays connected in the database; the next turn tries again.
		s.log.Error("cannot record a gone endpoint", "endpoint", ep.ID, "error", err.Error())
		return
	}
	s.log.Warn("endpoint disconnected", "endpoint", ep.ID, "reason", reason)
	l := s.live
	l.mu.Lock()
	delete(l.serverStart, ep.ID)
	delete(l.listed, ep.ID)
	for pid, p := range l.panes {
		if p.endpointID == ep.ID {
			delete(l.panes, pid)
		}
	}
	l.rebind = true
	l.mu.Unlock()
	s.endpointsChanged()
}

// rebindStranded moves the undelivered messages of each gone endpoint to its
// replacement: the one connected endpoint on the same tmux socket (the
// server was restarted there). Only the repos the replacement hosts move;
// nothing moves while the old endpoint is connected.
func (s *Service) rebindStranded(ctx context.Context) error {
	eps, err := s.knownEndpoints(ctx)
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
		pending, err := store.PendingOn(ctx, s.db.Reader, old.ID)
		if err != nil {
			return err
		}
		var repos []string
		for _, w := range repl[0].Windows {
			if pending[w.Repo] > 0 {
				repos = append(repos, w.Repo)
			}
		}
		n, err := s.store.Endpoints.Rebind(ctx, old.ID, repl[0].ID, repos)
		if err != nil {
			return err
		}
		if n > 0 {
			s.log.Info("messages moved to the replacement endpoint", "from", old.ID, "to", repl[0].ID, "messages", n)
			moved += n
		}
	}
	if moved > 0 {
		s.wake()
	}
	return nil
}

// paneOf finds the tamq window a process runs in: the marked pane whose
// process is the process itself or one of its ancestors, as tmux reports the
// pane's process. self says the process is the pane's own (a window's
// broker). A process in no such pane is the operator's. Only the tmux servers
// of known endpoints are asked, never one a client names: a server anyone can
// start could mark a window with any repo.
func (s *Service) paneOf(ctx context.Context, pid int32) (p paneSeen, self, ok bool) {
	// A client that sends many messages is looked up once a second: the walk
	// up the process tree reads a file per ancestor. Its answer cannot go
	// stale in a way that matters: a process never becomes a descendant of a
	// pane that starts after it.
	st, err := proc.ReadStat(int(pid))
	if err != nil {
		return paneSeen{}, false, false
	}
	if c, hit := s.live.cachedSender(st); hit {
		return c.pane, c.self, c.ok
	}
	p, self, ok = s.findPane(ctx, int(pid))
	s.live.cacheSender(st, senderSeen{pane: p, self: self, ok: ok})
	return p, self, ok
}

func (s *Service) findPane(ctx context.Context, pid int) (p paneSeen, self, ok bool) {
	chain, err := proc.Ancestors(pid)
	if err != nil || len(chain) == 0 {
		return paneSeen{}, false, false
	}
	if p, self, ok := s.live.match(chain); ok {
		return p, self, true
	}
	// A window opened since the last listing: list the servers the sender
	// runs under, and only those (serversAbove), so a sender outside tmux
	// costs no tmux call. There is no rate limit: one here let a send from a
	// window opened a moment after another send's lookup go out as the
	// operator's, and a sender in one of our servers but in no window of
	// ours (the user's own shell there) costs one listing of that server.
	eps, err := s.knownEndpoints(ctx)
	if err != nil {
		return paneSeen{}, false, false
	}
	servers := serversAbove(chain, eps)
	if len(servers) == 0 {
		return paneSeen{}, false, false
	}
	now := time.Now()
	for _, ep := range servers {
		s.list(ctx, ep, now)
	}
	return s.live.match(chain)
}

// serversAbove are the connected endpoints whose tmux server is an ancestor
// of the process (chain: it and its ancestors, nearest first), the only ones
// that can have it in a pane: tmux forks every pane's process itself. So a
// sender outside tmux (the operator's shell, a script, the engine) lists no
// server, and one in a window lists its own, however many endpoints there
// are. A chain cut short by the walk's bound could hide the server: then
// every one is listed, as before.
func serversAbove(chain []proc.Stat, eps []queue.Endpoint) []queue.Endpoint {
	whole := len(chain) < proc.MaxDepth
	var out []queue.Endpoint
	for _, ep := range eps {
		if ep.State != queue.Connected {
			continue
		}
		if !whole || slices.ContainsFunc(chain, func(st proc.Stat) bool { return st.PID == ep.ServerPID }) {
			out = append(out, ep)
		}
	}
	return out
}
