package service

import (
	"log/slog"
	"time"
)

// spell is a run of like failures (the disk full: every send and claim
// fails until there is room again), logged when it begins and when it ends,
// so that a flood writes two lines instead of one per failure. The log is
// in the state directory too: a full disk would drop the lines anyway, and
// a file size limit would let them fill what is left. Only the goroutine
// that owns it uses it.
type spell struct {
	n     int
	since time.Time
}

// failed logs msg with err if it begins a spell; now is when, on the
// service's clock.
func (sp *spell) failed(now time.Time, log *slog.Logger, msg string, err error) {
	if sp.n == 0 {
		sp.since = now
		log.Error(msg, "error", err.Error())
	}
	sp.n++
}

// ok ends a spell, if one was under way, logging msg with how long it lasted.
func (sp *spell) ok(log *slog.Logger, msg string) {
	if sp.n > 0 {
		log.Info(msg, "failures", sp.n, "since", sp.since.Format(time.RFC3339))
		*sp = spell{}
	}
}
