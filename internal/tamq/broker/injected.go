package broker

import (
	"strings"
	"time"
)

// EchoWindow is how long text we injected is recognized when the agent's
// screen shows it again.
const EchoWindow = 10 * time.Minute

// The texts injected are remembered within EchoWindow, and at most
// maxInjected of them and maxInjectedBytes (folded) in all, the oldest
// forgotten first: a window that gets many deliveries keeps a bounded
// memory. One delivery is at most queue.MaxPaste plus an envelope, well
// under the byte bound.
const (
	maxInjected      = 32
	maxInjectedBytes = 256 << 10
)

// injections remembers the texts tamq wrote into the agent lately, so that
// no line of them is read back as the agent's own. They are kept folded
// (every run of white space, newlines too, one space): an agent's screen
// shows a delivered text re-wrapped at its own width, indented or with its
// quote marks gone, so a row of it is a piece of the text, not one of its
// lines. A row that starts with "To:<repo>:" because of where the screen
// wrapped must not become a message from this window (security item 8).
type injections struct {
	texts []injectedText
	bytes int
	seq   uint64 // texts added so far
}

type injectedText struct {
	folded string
	at     time.Time
	seq    uint64
}

// fold makes every run of white space (newlines, tabs, no-break spaces
// too) one space and trims both ends.
func fold(s string) string { return strings.Join(strings.Fields(s), " ") }

// add remembers text, injected at now.
func (r *injections) add(text string, now time.Time) {
	f := fold(text)
	r.seq++
	if f == "" {
		return
	}
	r.texts = append(r.texts, injectedText{folded: f, at: now, seq: r.seq})
	r.bytes += len(f)
	r.expire(now)
	// The newest text is always kept, whatever its size.
	for len(r.texts) > 1 && (len(r.texts) > maxInjected || r.bytes > maxInjectedBytes) {
		r.drop()
	}
}

// holds reports whether line, folded, is a piece of a text injected within
// EchoWindow, and after the first `after` texts (0: any). A line of white
// space is no piece of anything: it ends blocks, as it always did.
func (r *injections) holds(line string, now time.Time, after uint64) bool {
	r.expire(now)
	if r.seq <= after || len(r.texts) == 0 {
		return false // nothing to compare with: most lines, no string made
	}
	f := fold(line)
	if f == "" {
		return false
	}
	for _, t := range r.texts {
		if t.seq > after && strings.Contains(t.folded, f) {
			return true
		}
	}
	return false
}

func (r *injections) expire(now time.Time) {
	for len(r.texts) > 0 && now.Sub(r.texts[0].at) >= EchoWindow {
		r.drop()
	}
}

func (r *injections) drop() {
	r.bytes -= len(r.texts[0].folded)
	r.texts[0] = injectedText{} // let the string go
	r.texts = r.texts[1:]
}
