package service

import (
	"context"
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/tamq/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// Writer puts text into a window's terminal.
type Writer interface {
	Write(ctx context.Context, ep store.Endpoint, w store.Window, text string) (Written, error)
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
}

// Write implements Writer.
func (tw TmuxWriter) Write(ctx context.Context, ep store.Endpoint, w store.Window, text string) (Written, error) {
	srv := tmux.Server{Socket: ep.TmuxSocket}
	if err := srv.Paste(ctx, w.PaneID, text); err != nil {
		return Written{Path: "tmux", MaybeWritten: !errors.Is(err, tmux.ErrNotWritten)}, err
	}
	select {
	case <-time.After(tw.Pause(text)):
	case <-ctx.Done():
		return Written{Path: "tmux", MaybeWritten: true}, ctx.Err()
	}
	if err := srv.SendEnter(ctx, w.PaneID); err != nil {
		return Written{Path: "tmux", MaybeWritten: true}, err
	}
	return Written{Path: "tmux"}, nil
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
// ack deadlines, claims due messages (one per window at a time, so writes into
// one terminal never interleave) and delivers them, sleeping until the next
// thing is due or it is woken.
func (s *Service) dispatch(ctx context.Context) {
	busy := map[string]bool{}
	done := make(chan outcome)
	inflight := 0
	defer func() {
		for ; inflight > 0; inflight-- {
			<-done
		}
	}()
	recovered := false
	for {
		if !recovered {
			recovered = s.recoverClaims(ctx) == nil
		}
		s.expireAcks(ctx)
		// Wake at the earliest of: a free window's next message, an ack deadline.
		var next time.Time
		earliest := func(t time.Time) {
			if !t.IsZero() && (next.IsZero() || t.Before(next)) {
				next = t
			}
		}
		if d, err := s.store.NextAckDeadline(ctx); err == nil {
			earliest(d)
		}
		targets, err := s.store.QueuedTargets(ctx)
		if err != nil && ctx.Err() == nil {
			s.log.Error("reading the queue failed", "error", err.Error())
		}
		now := s.opts.Now()
		for _, t := range targets {
			if busy[t.Key()] || s.isStopping() {
				continue // a busy window wakes the loop when its delivery ends
			}
			if t.NextAt.After(now) {
				earliest(t.NextAt)
				continue
			}
			m, ok, err := s.store.Claim(ctx, s.instance, DeliveryLease, t)
			if err != nil {
				if ctx.Err() == nil {
					s.log.Error("claim failed", "error", err.Error())
				}
				continue
			}
			if !ok {
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
				s.deliver(context.WithoutCancel(ctx), m)
				done <- outcome{key: key}
			}()
		}
		wait := time.Hour
		if !next.IsZero() {
			wait = max(next.Sub(s.opts.Now()), time.Millisecond)
		}
		timer := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			timer.Stop()
			return
		case <-s.wakeCh:
		case o := <-done:
			inflight--
			delete(busy, o.key)
			s.busy.Delete(o.key)
		case <-timer.C:
		}
		timer.Stop()
	}
}

// recoverClaims returns to the queue every delivery claimed by an earlier
// instance (a crash or kill mid-delivery): the same id is delivered again.
func (s *Service) recoverClaims(ctx context.Context) error {
	ids, err := s.store.ExpiredLeases(ctx, s.instance)
	if err != nil {
		return err
	}
	for _, id := range ids {
		if _, err := s.store.Transition(ctx, id, "delivery interrupted; redelivering", func(m *queue.Message) error {
			return m.LeaseExpired(s.opts.Now())
		}); err != nil {
			s.log.Error("recover claim", "message", id, "error", err.Error())
		}
	}
	return nil
}

func (s *Service) expireAcks(ctx context.Context) {
	ids, err := s.store.DueAcks(ctx)
	if err != nil {
		return
	}
	t := timing(s.opts.Config)
	for _, id := range ids {
		s.store.Transition(ctx, id, "ack deadline passed", func(m *queue.Message) error {
			return m.AckDeadlinePassed(s.opts.Now(), t)
		})
	}
}

// deliver writes one claimed message and records the outcome.
func (s *Service) deliver(ctx context.Context, m queue.Message) {
	t := timing(s.opts.Config)
	ep, w, err := s.windowFor(ctx, m.EndpointID, m.Target)
	var wr Written
	if err == nil {
		wctx, cancel := context.WithTimeout(ctx, DeliveryLease/2)
		wr, err = s.opts.Writer.Write(wctx, ep, w, queue.Envelope(m))
		cancel()
	}
	if err != nil {
		s.log.Warn("delivery failed", "message", m.ID, "target", m.Target, "maybe_written", wr.MaybeWritten, "error", err.Error())
		if _, terr := s.store.Transition(context.WithoutCancel(ctx), m.ID, "write failed", func(x *queue.Message) error {
			return x.WriteFailed(s.opts.Now(), t, wr.MaybeWritten, err.Error())
		}); terr != nil {
			s.log.Error("record failed write", "message", m.ID, "error", terr.Error())
		}
		return
	}
	// injected means written: the time is the writer's report of the write.
	at := wr.At
	if at.IsZero() {
		at = s.opts.Now()
	}
	if _, err := s.store.TransitionDetail(context.WithoutCancel(ctx), m.ID, "written to terminal", wr.detail(), func(x *queue.Message) error {
		return x.Written(at, t)
	}); err != nil {
		s.log.Error("record write", "message", m.ID, "error", err.Error())
	}
	s.log.Debug("delivered", "message", m.ID, "target", m.Target, "attempt", m.Attempts)
}

func (s *Service) windowFor(ctx context.Context, endpointID, repo string) (store.Endpoint, store.Window, error) {
	eps, err := s.knownEndpoints(ctx)
	if err != nil {
		return store.Endpoint{}, store.Window{}, err
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
	return store.Endpoint{}, store.Window{}, errNoWindow
}

var errNoWindow = errors.New("the target window is no longer recorded")
