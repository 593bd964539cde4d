package service

import (
	"context"
	"encoding/json"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/protocol"
	"github.com/tmux-amq/tamq/internal/tamq/store"
)

// brokers are the live broker sessions, by tmux socket and pane.
type brokers struct {
	mu   sync.Mutex
	live map[string]*brokerConn
}

func paneKey(socket, pane string) string { return socket + "\x00" + pane }

func (b *brokers) get(socket, pane string) *brokerConn {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.live[paneKey(socket, pane)]
}

// brokerConn is one broker's session: one delivery at a time (the dispatcher
// never has two in flight for a window).
type brokerConn struct {
	conn    net.Conn
	mu      sync.Mutex
	replies chan protocol.Response
	closed  chan struct{}
	seq     int
}

// Live reports whether a broker session serves the pane.
func (s *Service) brokerLive(socket, pane string) bool { return s.brokers.get(socket, pane) != nil }

// brokerSession is the stream handler: it records the broker as live until
// its connection ends.
func (s *Service) brokerSession(_ context.Context, _ protocol.Peer, req *protocol.Request) (any, error) {
	var args protocol.BrokerSessionArgs
	if err := protocol.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if args.Socket == "" || args.Pane == "" {
		return nil, errs.New(errs.BadRequest, "a broker session needs its tmux socket and pane")
	}
	return protocol.Stream{
		Result: map[string]bool{"accepted": true},
		Run: func(conn net.Conn, fr *protocol.FrameReader) {
			bc := &brokerConn{conn: conn, replies: make(chan protocol.Response, 1), closed: make(chan struct{})}
			key := paneKey(args.Socket, args.Pane)
			s.brokers.mu.Lock()
			if s.brokers.live == nil {
				s.brokers.live = map[string]*brokerConn{}
			}
			if old := s.brokers.live[key]; old != nil {
				old.conn.Close() // a reconnecting broker replaces its dead session
			}
			s.brokers.live[key] = bc
			s.brokers.mu.Unlock()
			s.log.Info("broker attached", "repo", args.Repo, "pane", args.Pane)
			defer func() {
				s.brokers.mu.Lock()
				if s.brokers.live[key] == bc {
					delete(s.brokers.live, key)
				}
				s.brokers.mu.Unlock()
				close(bc.closed)
				s.log.Info("broker detached", "repo", args.Repo, "pane", args.Pane)
			}()
			for {
				frame, err := fr.Next()
				if err != nil {
					return
				}
				var resp protocol.Response
				if json.Unmarshal(frame, &resp) == nil {
					select {
					case bc.replies <- resp:
					default: // an answer nobody waits for
					}
				}
			}
		},
	}, nil
}

// deliver asks the broker to write text and reports what it said.
func (bc *brokerConn) deliver(ctx context.Context, d protocol.DeliverArgs) (Written, error) {
	out := Written{Path: "broker"}
	bc.mu.Lock()
	defer bc.mu.Unlock()
	bc.seq++
	id := strconv.Itoa(bc.seq)
	frame, err := protocol.EncodeFrame(protocol.Request{Proto: protocol.Version, Op: protocol.OpDeliver, ID: id, Args: mustJSON(d)})
	if err != nil {
		return out, err
	}
	if _, err := bc.conn.Write(frame); err != nil {
		return out, errs.Wrap(errs.Unavailable, err, "broker session lost")
	}
	out.MaybeWritten = true // from here on, bytes may have gone in
	for {
		select {
		case <-ctx.Done():
			return out, errs.New(errs.Timeout, "the broker did not report the write in time")
		case <-bc.closed:
			return out, errs.New(errs.Unavailable, "the broker session ended during a delivery")
		case resp := <-bc.replies:
			if resp.ID != id {
				continue
			}
			var res protocol.DeliverResult
			if !resp.OK || json.Unmarshal(resp.Result, &res) != nil {
				return out, errs.New(errs.Internal, "the broker answered the delivery without a result")
			}
			out.Moment, out.WaitedMS = "bounded", res.WaitedMS
			if res.Quiet {
				out.Moment = "quiet"
			}
			if !res.Written {
				out.MaybeWritten = res.MaybeWritten
				return out, errors.New(res.Error)
			}
			out.MaybeWritten, out.At = false, res.WrittenAt
			return out, nil
		}
	}
}

func mustJSON(v any) json.RawMessage {
	b, _ := json.Marshal(v)
	return b
}

// RoutingWriter delivers through the window's broker when one is attached,
// else through tmux.
type RoutingWriter struct {
	svc  *Service
	tmux Writer
}

// Write implements Writer.
func (rw RoutingWriter) Write(ctx context.Context, ep store.Endpoint, w store.Window, text string) (Written, error) {
	if bc := rw.svc.brokers.get(ep.TmuxSocket, w.PaneID); bc != nil {
		c := rw.svc.opts.Config.Delivery
		d := protocol.DeliverArgs{Text: text, PauseMS: int(rw.svc.enterPause(text) / time.Millisecond),
			QuietMS: c.QuietMS, MaxWaitMS: c.MaxQuietWaitMS}
		return bc.deliver(ctx, d)
	}
	return rw.tmux.Write(ctx, ep, w, text)
}
