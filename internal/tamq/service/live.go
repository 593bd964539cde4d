package service

import (
	"sync"

	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// live is the service's view of the terminals it delivers into: which
// process runs in which marked pane, whether an agent runs in a window, and
// why a window cannot take a delivery now. The watcher keeps it fresh from
// tmux, the broker sessions from what their brokers report; the dispatcher
// and the senders' lookups read it.
type live struct {
	mu sync.Mutex
	// panes are the processes of the marked, live panes, by pid.
	panes map[int]paneSeen
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
		panes: map[int]paneSeen{}, paneHealth: map[string]string{}, brokerWait: map[string]string{}, screenWait: map[string]string{},
		brokerAgent: map[string]bool{}, paneAgent: map[string]bool{},
	}
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

// paneExited is the pane's wait reason when the window's program has
// exited (tmux keeps the dead pane); the window itself may still be there.
const paneExited = "the agent in its window has exited"

// paneHealthOf is why tmux shows the window cannot take a delivery (its
// agent exited, its window closed), or "".
func (l *live) paneHealthOf(key string) string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.paneHealth[key]
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

// forgetPanes drops what is known of the panes of an endpoint whose tmux
// server is gone.
func (l *live) forgetPanes(endpointID string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for pid, p := range l.panes {
		if p.endpointID == endpointID {
			delete(l.panes, pid)
		}
	}
}
