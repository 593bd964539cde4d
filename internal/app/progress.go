package app

import (
	"os"

	"github.com/schollz/progressbar/v3"
	"golang.org/x/term"
)

// Progress shows how far a long run is, on stderr. The zero value, and a
// nil *Progress, show nothing.
type Progress struct {
	bar *progressbar.ProgressBar
}

// ShowsProgress reports whether progress bars show: only on a terminal
// (stderr), and neither with --quiet nor --json. It and NewProgress are
// functions of the App's streams and flags rather than its methods: only the
// few long-running commands draw a bar.
func ShowsProgress(a *App) bool {
	f, ok := a.Err.(*os.File)
	return ok && !a.Quiet && !a.JSON && term.IsTerminal(int(f.Fd()))
}

// NewProgress returns a progress bar on stderr for total units ("bytes", or
// what unit names, like "msgs"), or a silent one (nil) when progress does not
// show; total -1 means unknown.
func NewProgress(a *App, total int64, description, unit string) *Progress {
	if !ShowsProgress(a) {
		return nil
	}
	opts := []progressbar.Option{
		progressbar.OptionSetWriter(a.Err),
		progressbar.OptionSetDescription(description),
		progressbar.OptionShowCount(),
		progressbar.OptionThrottle(100_000_000), // 100 ms: redrawing costs more than the work
		progressbar.OptionClearOnFinish(),
		progressbar.OptionFullWidth(),
	}
	if unit == "bytes" {
		opts = append(opts, progressbar.OptionShowBytes(true))
	} else {
		opts = append(opts, progressbar.OptionShowIts(), progressbar.OptionSetItsString(unit))
	}
	return &Progress{bar: progressbar.NewOptions64(total, opts...)}
}

// Set moves the bar to n.
func (p *Progress) Set(n int64) {
	if p != nil {
		_ = p.bar.Set64(n)
	}
}

// Add moves the bar on by n.
func (p *Progress) Add(n int64) {
	if p != nil {
		_ = p.bar.Add64(n)
	}
}

// Done clears the bar.
func (p *Progress) Done() {
	if p != nil {
		_ = p.bar.Finish()
	}
}
