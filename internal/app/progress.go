package app

import (
	"fmt"
	"io"
	"os"
	"time"

	"github.com/dustin/go-humanize"
	"golang.org/x/term"
)

// Progress shows how far a long run is: one line on stderr, redrawn in
// place. The zero value, and a nil *Progress, show nothing.
//
// It is a counter line of ours, not a progress-bar library: the library it
// replaced linked 1.2 MB into every command for the three that draw one.
type Progress struct {
	w           io.Writer
	now         func() time.Time
	total       int64
	description string
	unit        string
	n           int64
	drawn       time.Time
}

// redrawEvery bounds how often the line is redrawn: redrawing costs more
// than the work between two draws.
const redrawEvery = 100 * time.Millisecond

// ShowsProgress reports whether progress shows: only on a terminal
// (stderr), and neither with --quiet nor --json. It and NewProgress are
// functions of the App's streams and flags rather than its methods: only the
// few long-running commands draw one.
func ShowsProgress(a *App) bool {
	f, ok := a.Err.(*os.File)
	return ok && !a.Quiet && !a.JSON && term.IsTerminal(int(f.Fd()))
}

// NewProgress returns a progress line on stderr for total units ("bytes", or
// what unit names, like "msgs"), or a silent one (nil) when progress does not
// show; total -1 means unknown.
func NewProgress(a *App, total int64, description, unit string) *Progress {
	if !ShowsProgress(a) {
		return nil
	}
	now := a.Now
	if now == nil {
		now = time.Now
	}
	return &Progress{w: a.Err, now: now, total: total, description: description, unit: unit}
}

// Set moves the count to n.
func (p *Progress) Set(n int64) {
	if p != nil {
		p.n = n
		p.draw()
	}
}

// Add moves the count on by n.
func (p *Progress) Add(n int64) {
	if p != nil {
		p.n += n
		p.draw()
	}
}

// Done clears the line.
func (p *Progress) Done() {
	if p != nil && !p.drawn.IsZero() {
		fmt.Fprint(p.w, "\r\x1b[K")
	}
}

func (p *Progress) draw() {
	now := p.now()
	if !p.drawn.IsZero() && now.Sub(p.drawn) < redrawEvery {
		return
	}
	p.drawn = now
	line := p.description + " " + p.count(p.n)
	if p.total > 0 {
		line += fmt.Sprintf("/%s (%d%%)", p.count(p.total), min(100, p.n*100/p.total))
	}
	if p.unit != "bytes" {
		line += " " + p.unit
	}
	// Back to the line's start, the line, then the rest of the old one cleared.
	fmt.Fprint(p.w, "\r"+line+"\x1b[K")
}

func (p *Progress) count(n int64) string {
	if p.unit == "bytes" {
		return humanize.Bytes(uint64(max(n, 0)))
	}
	return humanize.Comma(n)
}
