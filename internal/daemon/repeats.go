package daemon

import (
	"container/list"
	"context"
	"fmt"
	"log/slog"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
)

// Repeats limits the warnings and errors a service logs over and over: a
// State Hub away for half an hour, another user's process knocking on the
// socket, a broken database read every second. The first of a run is
// written whole; the same one again within the window is counted, not
// written; when the window ends, one line says how many there were, with
// the attributes of the last ("… (repeated 5374 times in the last 1m0s)").
// Then the next one starts a new run. A run costs a line and a count per
// window, whatever its rate.
//
// Two records are the same one when their level, message and identifying
// attributes are equal. The identifying attributes are those that name
// what the line is about (identifyingKeys: a lease, an endpoint, a repo, a
// peer's uid...), so that a warning about lease A never hides one about
// lease B. Every other attribute (an error's text, a pid, a count, a time)
// is detail that differs from one repeat to the next and must not make it
// a new one: were it part of the key, a caller (or another local user)
// that changes it each time would defeat the limit. A new attribute that
// names the subject of a line belongs in identifyingKeys
// (TestEveryLoggedAttributeIsClassified asks for each key logged).
//
// Debug and info records are never held back: they are the story of the
// work, and are not what floods.
type Repeats struct {
	clock  clock.Clock
	window time.Duration

	mu   sync.Mutex
	runs map[string]*list.Element // of *run, by key
	// used holds the runs, the one seen last in front: past maxRuns the
	// one seen longest ago makes room (its count told), so that a burst of
	// different warnings neither grows the memory nor stops the one that
	// repeats from being counted.
	used   list.List
	armed  bool // a flush waits for the earliest run that held one back to end
	done   chan struct{}
	closed bool
}

// maxRuns bounds the runs Repeats keeps.
const maxRuns = 1024

// identifyingKeys are the attributes that name what a log line is about;
// see Repeats.
var identifyingKeys = map[string]bool{
	"lease": true, "trigger": true, "task": true, "workplan": true, "checkpoint": true, "work": true,
	"message": true, "endpoint": true, "repo": true, "target": true, "kind": true, "id": true,
	"op": true, "caller": true, "peer_uid": true, "field": true, "rule": true, "via": true, "event": true, "what": true,
}

// run is a record seen within a window: when it was first written, how
// many more were held back, and the last of them with its handler.
type run struct {
	key   string
	start time.Time
	n     int
	last  slog.Record
	h     slog.Handler
}

// NewRepeats limits repeats (see Repeats) within window, by clk; a window
// of 0 or less limits nothing.
func NewRepeats(clk clock.Clock, window time.Duration) *Repeats {
	return &Repeats{clock: clk, window: window, runs: map[string]*list.Element{}, done: make(chan struct{})}
}

// Handler wraps next: records go through it, limited.
func (rp *Repeats) Handler(next slog.Handler) slog.Handler {
	return &repeatHandler{rp: rp, next: next}
}

// Close writes the counts of the runs not yet told (a service stopping
// says what it held back) and stops waiting for windows to end; what comes
// after is written as it comes.
func (rp *Repeats) Close() {
	rp.mu.Lock()
	if rp.closed {
		rp.mu.Unlock()
		return
	}
	rp.closed = true
	close(rp.done)
	rp.mu.Unlock()
	rp.flush(true)
}

type repeatHandler struct {
	rp   *Repeats
	next slog.Handler
	// key holds the identifying attributes and groups added by With.
	key string
}

func (h *repeatHandler) Enabled(ctx context.Context, l slog.Level) bool {
	return h.next.Enabled(ctx, l)
}

func (h *repeatHandler) WithAttrs(as []slog.Attr) slog.Handler {
	key := h.key
	for _, a := range as {
		key += identifying(a)
	}
	return &repeatHandler{rp: h.rp, next: h.next.WithAttrs(as), key: key}
}

func (h *repeatHandler) WithGroup(name string) slog.Handler {
	return &repeatHandler{rp: h.rp, next: h.next.WithGroup(name), key: h.key + "\x00group=" + name}
}

func (h *repeatHandler) Handle(ctx context.Context, r slog.Record) error {
	rp := h.rp
	if r.Level < slog.LevelWarn || rp.window <= 0 {
		return h.next.Handle(ctx, r)
	}
	var b strings.Builder
	b.WriteString(r.Level.String())
	b.WriteString("\x00")
	b.WriteString(r.Message)
	b.WriteString(h.key)
	r.Attrs(func(a slog.Attr) bool {
		b.WriteString(identifying(a))
		return true
	})
	key := b.String()

	now := rp.clock.Now()
	rp.mu.Lock()
	var told []*run
	if e, ok := rp.runs[key]; ok {
		ru := e.Value.(*run)
		if now.Before(ru.start.Add(rp.window)) {
			ru.n++
			ru.last, ru.h = r.Clone(), h.next
			rp.used.MoveToFront(e)
			rp.arm(now)
			rp.mu.Unlock()
			return nil
		}
		told = rp.end(e, told)
	}
	if !rp.closed {
		if rp.used.Len() >= maxRuns {
			told = rp.end(rp.used.Back(), told)
		}
		rp.runs[key] = rp.used.PushFront(&run{key: key, start: now})
	}
	rp.mu.Unlock()
	rp.tell(ctx, told, now)
	return h.next.Handle(ctx, r)
}

// identifying is a's part of a record's key: its key and value when it
// names what the record is about, nothing otherwise.
func identifying(a slog.Attr) string {
	if !identifyingKeys[a.Key] {
		return ""
	}
	return "\x00" + a.Key + "=" + a.Value.String()
}

// arm makes sure a flush waits for the earliest run that held a record
// back to end; mu is held.
func (rp *Repeats) arm(now time.Time) {
	if rp.armed || rp.closed {
		return
	}
	var first time.Time
	for e := rp.used.Front(); e != nil; e = e.Next() {
		if r := e.Value.(*run); r.n > 0 && (first.IsZero() || r.start.Before(first)) {
			first = r.start
		}
	}
	if first.IsZero() {
		return
	}
	rp.armed = true
	after := rp.clock.After(first.Add(rp.window).Sub(now))
	go func() {
		select {
		case <-after:
			rp.flush(false)
		case <-rp.done:
		}
	}()
}

// flush tells the runs whose window has ended (all, when closing) and
// waits for the next to end.
func (rp *Repeats) flush(all bool) {
	now := rp.clock.Now()
	rp.mu.Lock()
	rp.armed = false
	var told []*run
	for e := rp.used.Front(); e != nil; {
		next := e.Next()
		if all || !now.Before(e.Value.(*run).start.Add(rp.window)) {
			told = rp.end(e, told)
		}
		e = next
	}
	rp.arm(now)
	rp.mu.Unlock()
	rp.tell(context.Background(), told, now)
}

// end forgets the run of e, adding it to told when it held records back;
// mu is held.
func (rp *Repeats) end(e *list.Element, told []*run) []*run {
	r := rp.used.Remove(e).(*run)
	delete(rp.runs, r.key)
	if r.n > 0 {
		told = append(told, r)
	}
	return told
}

// tell writes each run's count, as its last record with the count after
// its message, the oldest run first.
func (rp *Repeats) tell(ctx context.Context, runs []*run, now time.Time) {
	slices.SortFunc(runs, func(a, b *run) int { return a.start.Compare(b.start) })
	for _, r := range runs {
		times := "times"
		if r.n == 1 {
			times = "time"
		}
		span := min(now.Sub(r.start), rp.window).Round(time.Second)
		s := slog.NewRecord(now, r.last.Level, fmt.Sprintf("%s (repeated %d %s in the last %s)", r.last.Message, r.n, times, span), 0)
		r.last.Attrs(func(a slog.Attr) bool {
			s.AddAttrs(a)
			return true
		})
		r.h.Handle(ctx, s)
	}
}
