package service

import (
	"context"
	"encoding/json"
	"log/slog"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// brokerWriteTimeout bounds one frame written to a broker: a broker that
// stops reading must not hold a delivery, or shutdown, forever.
const brokerWriteTimeout = 5 * time.Second

// brokerTable are the live broker sessions, by delivery key (endpoint and
// repo): the broker sessions handler adds and removes them; the deliverer,
// the watcher, the lease keeper and the lease rescuer look them up.
type brokerTable struct {
	mu   sync.Mutex
	live map[string]*brokerConn
}

func (t *brokerTable) get(key string) *brokerConn {
	t.mu.Lock()
	defer t.mu.Unlock()
	return t.live[key]
}

// add records bc as the window's session, unless the window has a live one
// already.
func (t *brokerTable) add(key string, bc *brokerConn) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live == nil {
		t.live = map[string]*brokerConn{}
	}
	if t.live[key] != nil {
		return false
	}
	t.live[key] = bc
	return true
}

// remove forgets bc, if it is still the window's session.
func (t *brokerTable) remove(key string, bc *brokerConn) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.live[key] == bc {
		delete(t.live, key)
	}
}

// brokerSessions is the broker session stream handler: it verifies and
// serves each session, keeps it in the table while it lasts, and hands what
// a broker reports of its agent to the watcher and the lease keeper.
type brokerSessions struct {
	log       *slog.Logger
	endpoints endpointLister
	// addPane records a verified session's pane in the live view.
	addPane  func(p paneSeen)
	sessions sessionTable
	// reports are told what a broker reports of its agent (the watcher).
	reports brokerReports
	// adoptWindow has the lease keeper take up the window's last wake when
	// its broker attaches; leases makes the keeper look after a report.
	adoptWindow func(ctx context.Context, endpointID, repo string)
	leases      wakeup.Signal
	// attached wakes the lease rescuer (a new session may settle a delivery
	// a killed service left) and the dispatcher (deliveries that waited for
	// a broker may go now).
	attached, dispatch wakeup.Signal
	// work ends when shutdown begins: the lease keeper's look for a window's
	// last wake stops then.
	work context.Context
}

// sessionTable is where the handler keeps the live sessions (brokerTable).
type sessionTable interface {
	get(key string) *brokerConn
	add(key string, bc *brokerConn) bool
	remove(key string, bc *brokerConn)
}

// brokerReports hears what brokers report of their windows (the watcher).
type brokerReports interface {
	setWait(src waitSource, endpointID, repo, reason string)
	noteAgent(src waitSource, endpointID, repo string, running *bool)
	requestList(endpointIDs ...string)
}

// brokerConn is one broker's session: one delivery at a time (the dispatcher
// never has two in flight for a window). The session was verified when it
// opened: its process is the pane's own, on the tmux server of endpointID, in
// the window marked for repo.
type brokerConn struct {
	conn       net.Conn
	endpointID string
	repo       string
	paneID     string
	mu         sync.Mutex
	replies    chan brokerReply
	closed     chan struct{}
	seq        int
	// claims says the broker remembers its last delivery's claim and
	// answer (api.BrokerSessionArgs.Claims); lastDelivery is what it
	// reported of it when the session opened.
	claims       bool
	lastDelivery *api.LastDelivery

	// states counts the agent states the broker has reported, under
	// stateMu: a delivery the broker found the agent not ready for holds
	// the window only if no newer report came after its answer (the agent
	// may be back at its prompt already, and the broker says so only once).
	stateMu sync.Mutex
	states  uint64
	// last is the broker's latest report of its agent.
	last api.BrokerState
}

// view is the latest report of the window's broker, the session it
// came on and how many reports that session had made by then; live is
// false when no broker serves the window.
func (t *brokerTable) view(key string) (st api.BrokerState, bc *brokerConn, seq uint64, live bool) {
	bc = t.get(key)
	if bc == nil {
		return st, nil, 0, false
	}
	bc.stateMu.Lock()
	defer bc.stateMu.Unlock()
	return bc.last, bc, bc.states, bc.states > 0
}

// brokerReply is a broker's answer and how many agent states it had
// reported before it.
type brokerReply struct {
	resp   unixrpc.Response
	states uint64
}

// isLive reports whether a broker session serves the window.
func (t *brokerTable) isLive(endpointID, repo, paneID string) bool {
	bc := t.get(store.DeliveryKey(endpointID, repo))
	return bc != nil && bc.paneID == paneID
}

// verifyBroker checks that the process at the other end of a broker session
// is what it says: the process tmux runs in the pane, in a live pane of the
// window tamq marked for the repo. It returns the pane.
func (s *brokerSessions) verifyBroker(ctx context.Context, peer unixrpc.Peer, args api.BrokerSessionArgs) (paneSeen, error) {
	refuse := func(format string, a ...any) (paneSeen, error) {
		return paneSeen{}, errs.New(errs.PermissionDeny, "broker session for %s refused: "+format, append([]any{args.Repo}, a...)...)
	}
	if args.Socket == "" || args.Pane == "" || args.Repo == "" {
		return paneSeen{}, errs.New(errs.BadRequest, "a broker session needs its repo, tmux socket and pane")
	}
	// Only a tmux server tamq opened windows on is asked, never one the
	// client names: anyone can start a server and mark a window for any repo.
	eps, err := s.endpoints.known(ctx)
	if err != nil {
		return paneSeen{}, err
	}
	if !slices.ContainsFunc(eps, func(ep queue.Endpoint) bool { return ep.State == queue.Connected && ep.TmuxSocket == args.Socket }) {
		return refuse("tmux server %s is not one tamq opened windows on", args.Socket)
	}
	askCtx, cancel := askTmux(ctx)
	pid, wins, err := (tmux.Server{Socket: args.Socket}).Snapshot(askCtx)
	cancel()
	if err != nil {
		return refuse("cannot ask its tmux server: %v", err)
	}
	i := slices.IndexFunc(wins, func(w tmux.Window) bool { return w.PaneID == args.Pane })
	if i < 0 || wins[i].Dead {
		return refuse("no live pane %s on that tmux server", args.Pane)
	}
	w := wins[i]
	if w.Repo != args.Repo {
		return refuse("pane %s is in a window marked for %q", args.Pane, w.Repo)
	}
	chain, err := proc.Ancestors(int(peer.PID))
	if err != nil {
		return refuse("cannot read its process: %v", err)
	}
	// The session belongs to the process tmux started in the pane (tamq's
	// broker runs as the pane's own process), never to one that runs in
	// it: after a restart of tamq, a program the agent left in the
	// background would otherwise race the broker for the session and take
	// the window's deliveries (recorded as delivered, never typed).
	j := slices.IndexFunc(chain, func(st proc.Stat) bool { return st.PID == w.PanePID })
	switch {
	case j < 0:
		return refuse("its process (pid %d) does not run in pane %s", peer.PID, args.Pane)
	case j > 0:
		return refuse("its process (pid %d) runs in pane %s but is not the pane's own process (pid %d, the window's broker)", peer.PID, args.Pane, w.PanePID)
	}
	p := paneSeen{endpointID: "tmux-amq-" + strconv.Itoa(pid), socket: args.Socket, paneID: w.PaneID, repo: w.Repo,
		pid: w.PanePID, start: chain[j].StartTime}
	s.addPane(p)
	return p, nil
}

// brokerSession is the stream handler: it records the broker as live until
// its connection ends.
func (s *brokerSessions) brokerSession(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.BrokerSessionArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	p, err := s.verifyBroker(ctx, peer, args)
	if err != nil {
		s.log.Warn("broker session refused", "repo", args.Repo, "peer_pid", peer.PID, "error", err.Error())
		return nil, err
	}
	if s.sessions.get(store.DeliveryKey(p.endpointID, p.repo)) != nil {
		s.log.Warn("broker session refused: the window has a live one", "repo", p.repo, "peer_pid", peer.PID)
		return nil, errs.New(errs.Conflict, "broker session for %s refused: the window already has a live broker session", p.repo)
	}
	return unixrpc.Stream{
		Result: map[string]bool{"accepted": true},
		Run: func(conn net.Conn, fr *unixrpc.FrameReader) {
			bc := &brokerConn{conn: conn, endpointID: p.endpointID, repo: p.repo, paneID: p.paneID,
				replies: make(chan brokerReply, 1), closed: make(chan struct{}),
				claims: args.Claims, lastDelivery: args.LastDelivery}
			key := store.DeliveryKey(p.endpointID, p.repo)
			if !s.sessions.add(key, bc) {
				// A second session never displaces a live one: it would take
				// the window's deliveries from the broker that types them. A
				// broker whose session died is gone from the map already (its
				// connection ended), so a reconnecting one is not refused.
				// (Checked before accepting; this is the rare race of two
				// sessions accepted at once: the later one is closed.)
				return
			}
			s.log.Info("broker attached", "repo", p.repo, "pane", p.paneID, "endpoint", p.endpointID)
			defer func() {
				s.sessions.remove(key, bc)
				// Under stateMu: a deferral being recorded either holds the
				// window before this frees it, or sees the session closed.
				bc.stateMu.Lock()
				close(bc.closed)
				bc.stateMu.Unlock()
				// The broker's view goes with it; whether the window can take
				// deliveries is tmux's to say now (its agent may have exited).
				s.reports.setWait(fromBroker, p.endpointID, p.repo, "")
				s.reports.noteAgent(fromBroker, p.endpointID, p.repo, nil)
				s.reports.requestList(p.endpointID)
				s.log.Info("broker detached", "repo", p.repo, "pane", p.paneID)
			}()
			// The broker reports its agent from now on; what the pane showed
			// before it came no longer holds the window.
			s.reports.setWait(fromScreen, p.endpointID, p.repo, "")
			s.adoptWindow(s.work, p.endpointID, p.repo)
			s.attached.Wake() // it may settle a delivery a killed service left
			s.dispatch.Wake() // deliveries that waited for a broker may go now
			for {
				frame, err := fr.Next()
				if err != nil {
					return
				}
				s.brokerFrame(bc, frame)
			}
		},
	}, nil
}

// brokerFrame handles one frame a broker sent: the answer to a delivery, or
// a notification of its agent's state.
func (s *brokerSessions) brokerFrame(bc *brokerConn, frame []byte) {
	var note struct {
		Op   string          `json:"op"`
		Args json.RawMessage `json:"args"`
	}
	if json.Unmarshal(frame, &note) == nil && note.Op != "" {
		if note.Op != api.OpBrokerState {
			return // a notification this service does not know
		}
		var st api.BrokerState
		if json.Unmarshal(note.Args, &st) != nil {
			return
		}
		reason := ""
		if !st.AtPrompt {
			reason = brokerWaitReason(st.Reason)
		}
		if st.NoAgent {
			reason = program.NoAgentRunning
		}
		bc.stateMu.Lock()
		bc.states++
		bc.last = st
		s.reports.setWait(fromBroker, bc.endpointID, bc.repo, reason)
		bc.stateMu.Unlock()
		running := !st.NoAgent
		s.reports.noteAgent(fromBroker, bc.endpointID, bc.repo, &running)
		s.leases.Wake()
		return
	}
	var resp unixrpc.Response
	if json.Unmarshal(frame, &resp) == nil {
		bc.stateMu.Lock()
		states := bc.states
		bc.stateMu.Unlock()
		select {
		case bc.replies <- brokerReply{resp, states}:
		default: // an answer nobody waits for
		}
	}
}

// deliver asks the broker to write text and reports what it said.
func (bc *brokerConn) deliver(ctx context.Context, d api.DeliverArgs) Written {
	failed := func(err error) Written {
		// Once the request is out, bytes may have gone in.
		return Written{Outcome: api.DeliveryOutcome{Kind: api.Failed, Err: err, MaybeWritten: true}, Path: "broker"}
	}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.seq++
	id := strconv.Itoa(bc.seq)
	frame, err := unixrpc.EncodeFrame(unixrpc.Request{Proto: unixrpc.Version, Op: api.OpDeliver, ID: id, Args: mustJSON(d)})
	if err != nil {
		return Written{Outcome: api.DeliveryOutcome{Kind: api.Failed, Err: err}, Path: "broker"}
	}
	// A socket's deadline is on the kernel's wall clock, not the service's.
	bc.conn.SetWriteDeadline(time.Now().Add(brokerWriteTimeout))
	if _, err := bc.conn.Write(frame); err != nil {
		// A partly written frame is not a request the broker can act on:
		// nothing reached the agent (its broker is gone, most often with
		// the agent), so the message waits without spending its attempt.
		// What holds the window now is the pane's to say (the watcher lists
		// it), not this broker's, which is gone.
		return Written{Outcome: api.DeliveryOutcome{Kind: api.Unreachable, Reason: "the broker session ended"}}
	}
	for {
		select {
		case <-ctx.Done():
			return failed(errs.New(errs.Timeout, "the broker did not report the write in time"))
		case <-bc.closed:
			return failed(errs.New(errs.Unavailable, "the broker session ended during a delivery"))
		case reply := <-bc.replies:
			resp := reply.resp
			if resp.ID != id {
				continue
			}
			var res api.DeliveryOutcome
			if !resp.OK || json.Unmarshal(resp.Result, &res) != nil {
				out := failed(errs.New(errs.Internal, "the broker answered the delivery without a result"))
				out.broker, out.brokerStates = bc, reply.states
				return out
			}
			return bc.answered(res, reply.states)
		}
	}
}

// answered is the broker's answer to a delivery as the deliverer records
// it; states is how many agent states the broker had reported before the
// answer.
func (bc *brokerConn) answered(res api.DeliveryOutcome, states uint64) Written {
	if res.Kind == api.NotAtPrompt {
		res.Reason = brokerWaitReason(res.Reason)
	}
	return Written{Outcome: res, Path: "broker", broker: bc, brokerStates: states}
}

// brokerWaitReason is the wait reason of a window whose broker found it not
// ready: "no agent running" as it is, anything else as notAtPrompt says.
func brokerWaitReason(saw string) string {
	if saw == program.NoAgentRunning {
		return saw
	}
	return notAtPrompt(saw)
}

// notAtPrompt is the wait reason of a window whose broker says its agent is
// not at its input prompt, with what the broker saw instead.
func notAtPrompt(saw string) string {
	if saw == "" {
		return notAtPromptWords
	}
	return notAtPromptWords + ": " + saw
}

// notAtPromptWords begin every wait reason of an agent not at its prompt.
const notAtPromptWords = "the agent is not at its prompt"

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// RoutingWriter delivers through the window's broker when one is attached,
// else through tmux, unless the window's pane runs a broker (brokerRuns):
// then the delivery waits for its session. A write through tmux is
// remembered by nobody, so a kill in the middle of it would write it again
// at the next start; the broker remembers (leaseRescuer).
type RoutingWriter struct {
	brokers    brokerLookup
	config     *config.Loaded
	tmux       Writer
	brokerRuns func(ctx context.Context, ep queue.Endpoint, w queue.Window) bool
}

// waitingForBroker is the wait reason of a window whose broker has not
// attached yet (the service has just started, or its broker is coming back).
const waitingForBroker = "waiting for the window's broker to attach"

// Write implements Writer. The broker's session was verified for this very
// window (endpoint, repo and pane) when it opened; through tmux, every write
// checks the pane again.
func (rw RoutingWriter) Write(ctx context.Context, ep queue.Endpoint, w queue.Window, text string, confirm *Confirm) Written {
	if bc := rw.brokers.get(store.DeliveryKey(ep.ID, w.Repo)); bc != nil && bc.paneID == w.PaneID {
		c := rw.config.Delivery
		d := api.DeliverArgs{Text: text, PauseMS: int(enterPause(rw.config, text) / time.Millisecond),
			QuietMS: c.QuietMS, MaxWaitMS: c.MaxQuietWaitMS}
		if confirm != nil {
			d.Confirm = confirm.IDs // the broker asks deliveryCurrent right before its first byte
		}
		if claim, ok := ctx.Value(claimKey{}).(api.DeliveryClaim); ok && bc.claims {
			d.Claim = &claim // the broker remembers it with its answer
		}
		return bc.deliver(ctx, d)
	}
	if rw.brokerRuns != nil && rw.brokerRuns(ctx, ep, w) {
		return Written{Outcome: api.DeliveryOutcome{Kind: api.Unreachable, Reason: waitingForBroker}, Path: "broker"}
	}
	return rw.tmux.Write(ctx, ep, w, text, confirm)
}
