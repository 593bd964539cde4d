package broker

import (
	"context"
	"encoding/json"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// OpenSession opens the stream a window's broker keeps with the service at p:
// the service sends deliveries on it, the broker its answers and its agent's
// state. The handshake is bounded (10 s, as the client's quick questions);
// the stream then has no deadline.
func OpenSession(ctx context.Context, p paths.Paths, args api.BrokerSessionArgs) (net.Conn, *unixrpc.FrameReader, error) {
	return unixrpc.OpenStream(ctx, daemon.Client(p, 10*time.Second), api.OpBrokerSession, args)
}

// session keeps the broker attached to the service, so messages for this
// window are written through the broker (which knows when the agent is at
// its prompt, when it wants bracketed paste and when exactly the bytes went
// in), and tells the service whenever its view of the agent changes. When the
// service is down or restarts, it attaches again on its own; the terminal
// never waits.
type session struct {
	gate *Gate
	obs  *Observer
	// client reaches the service on connections of their own (a
	// delivery's confirmation), beside the session's.
	client *client.Client

	mu   sync.Mutex // one writer on the connection
	conn net.Conn
	sent *api.BrokerState // the view the service has, nil: none yet
	n    int

	// last is the last delivery with a claim and this broker's answer to
	// it, told to the service each time the session opens: a service
	// killed while the broker wrote never heard the answer, and its next
	// start must not write the same messages again. Only the session's
	// goroutine (run, serve) touches it.
	last *api.LastDelivery
}

// newSession wires the broker's delivery gate and its reports to the relay
// and the model; fg says whether an agent is the foreground program.
func newSession(relay *Relay, model *Model, obs *Observer, busy func() bool, fg *Foreground) *session {
	s := &session{gate: &Gate{Relay: relay, Model: model, Hooks: &HookState{},
		Foreground: fg, Busy: busy, Settle: 50 * time.Millisecond}, obs: obs}
	model.Changed, model.ChangedEvery = func() { s.report() }, 100*time.Millisecond
	relay.Observe, relay.Resized = model, model.Resize
	return s
}

// watch reports the view every interval until ctx ends (report sends only
// a change).
func (s *session) watch(ctx context.Context, interval time.Duration) {
	tick := time.NewTicker(interval)
	defer tick.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
			s.report()
		}
	}
}

// reattach paces the attempts to open the session again after it ended or
// could not open: soon after a service restarts, no more than every five
// seconds while it is down.
var reattach = backoff.Policy{Min: 100 * time.Millisecond, Max: 5 * time.Second}

// run keeps the session open until ctx ends, opening it again whenever it
// ends.
func (s *session) run(ctx context.Context, c *client.Client, args api.BrokerSessionArgs) {
	s.client = c
	var delay time.Duration
	args.Claims = true
	for ctx.Err() == nil {
		if args.Claims {
			args.LastDelivery = s.last
		}
		conn, fr, err := OpenSession(ctx, c.Paths, args)
		if errs.Is(err, errs.BadRequest) && args.Claims {
			// A service that predates claims refuses arguments it does
			// not know: the session goes on without them.
			args.Claims, args.LastDelivery = false, nil
			continue
		}
		if err == nil {
			delay = 0
			stop := context.AfterFunc(ctx, func() { conn.Close() })
			s.attach(conn)
			s.serve(fr)
			s.attach(nil)
			stop()
			conn.Close()
		}
		delay = reattach.Next(delay)
		select {
		case <-ctx.Done():
			return
		case <-time.After(delay):
		}
	}
}

// attach sets the connection (nil: none) and, on a new one, tells the
// service the broker's view at once. Both happen under the lock, so a
// report racing it sends nothing twice.
func (s *session) attach(conn net.Conn) {
	var st api.BrokerState
	if conn != nil {
		st = s.gate.State()
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.conn, s.sent = conn, nil
	if conn != nil {
		s.sendState(st)
	}
}

// report sends a broker_state notification when the view changed.
func (s *session) report() {
	st := s.gate.State()
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil || s.sent != nil && *s.sent == st {
		return
	}
	s.sendState(st)
}

// sendState writes a broker_state notification (a request that gets no
// reply). Called with mu held.
func (s *session) sendState(st api.BrokerState) {
	s.n++
	args, _ := json.Marshal(st)
	frame, err := unixrpc.EncodeFrame(unixrpc.Request{Proto: unixrpc.Version, Op: api.OpBrokerState, ID: "state-" + strconv.Itoa(s.n), Args: args})
	if err != nil {
		return
	}
	if _, err := s.conn.Write(frame); err == nil {
		s.sent = &st
	}
}

func (s *session) write(frame []byte) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.conn == nil {
		return net.ErrClosed
	}
	_, err := s.conn.Write(frame)
	return err
}

// serve writes each delivery the service sends and answers with what
// happened, until the connection ends.
func (s *session) serve(fr *unixrpc.FrameReader) {
	for {
		frame, err := fr.Next()
		if err != nil {
			return
		}
		req, err := unixrpc.DecodeRequest(frame)
		if err != nil || req.Op != api.OpDeliver {
			continue
		}
		var d api.DeliverArgs
		if err := unixrpc.DecodeArgs(req, &d); err != nil {
			continue
		}
		s.obs.Injected(d.Text) // never read back as an address
		bracketed := s.obs.BracketedPaste()
		delivery := Delivery{Text: d.Text, Bracketed: bracketed,
			Pause: time.Duration(d.PauseMS) * time.Millisecond, Quiet: time.Duration(d.QuietMS) * time.Millisecond,
			MaxWait: time.Duration(d.MaxWaitMS) * time.Millisecond}
		if len(d.Confirm) > 0 {
			delivery.Current = s.confirm(d.Confirm)
		}
		res := s.gate.Deliver(delivery)
		res.Bracketed = bracketed
		if d.Claim != nil {
			s.last = &api.LastDelivery{Claim: *d.Claim, Result: res}
		}
		b, _ := json.Marshal(res)
		reply, err := unixrpc.EncodeFrame(unixrpc.Response{Proto: unixrpc.Version, ID: req.ID, OK: true, Result: b})
		if err != nil || s.write(reply) != nil {
			return
		}
		// The view goes out again after every answer, even when it did
		// not change: the service holds the window on a "not ready" answer
		// until a report frees it (the gate can find the agent not ready
		// while the view last reported says it is at its prompt: a screen
		// model behind, a hook event during the reads), and it reads what
		// the agent did with a written prompt (took it: busy) only from a
		// report after the answer.
		s.forgetSent()
		s.report()
	}
}

// confirm asks the service, right before a delivery's first byte, whether
// its messages are still being delivered: a wake the engine cancelled while
// the gate waited for the agent's prompt is not typed. A service that does
// not answer confirms nothing.
func (s *session) confirm(ids []string) func() (bool, string) {
	return func() (bool, string) {
		ctx, cancel := context.WithTimeout(context.Background(), confirmTimeout)
		defer cancel()
		res, err := s.client.DeliveryCurrent(ctx, ids)
		switch {
		case err != nil:
			return false, "the service did not confirm the delivery: " + err.Error()
		case !res.Current:
			return false, res.Reason
		}
		return true, ""
	}
}

// confirmTimeout bounds the confirmation of a delivery (a local round trip).
const confirmTimeout = 2 * time.Second

// forgetSent makes the next report send the view whatever was sent before.
func (s *session) forgetSent() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.sent = nil
}
