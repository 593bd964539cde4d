// Package doctor checks what users get wrong when they set up tamq and
// coordination-engine. Each check says what it looked at and how that went,
// and, when it warns or fails, the fix: a command to run or a setting to
// change. The checks both programs share are here; each program's list is its
// `doctor` command (internal/tamq/cli, internal/engine/cli), and
// internal/app prints the report.
//
// A check never hangs: every probe has a bound (the timeouts below), so a
// hung service, State Hub or tmux shows as a failed check, not a stuck doctor.
package doctor

import (
	"errors"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Status is how a check went.
type Status string

const (
	OK   Status = "ok"
	Warn Status = "warn" // worth fixing; the program works without it
	Fail Status = "fail" // the program does not work as it should until fixed
)

// The bounds of the probes.
const (
	PingTimeout = time.Second     // one round trip to a service's socket
	HTTPTimeout = 2 * time.Second // one request to State Hub
	TmuxTimeout = 2 * time.Second // one tmux command
	// CredentialTimeout bounds statehub.credential_command: a password
	// manager's command line may take a moment, but not forever.
	CredentialTimeout = 5 * time.Second
	// StatusTimeout bounds asking a running service for its status, which
	// itself probes State Hub and tmux within a few seconds.
	StatusTimeout = 8 * time.Second
)

// Check is one check's result. Fix is empty when Status is OK.
type Check struct {
	Name   string `json:"name"`
	Status Status `json:"status"`
	Detail string `json:"detail"`
	Fix    string `json:"fix"`
}

// Report is the whole doctor run, as --json prints it.
type Report struct {
	OK     bool    `json:"ok"`
	Checks []Check `json:"checks"`
}

// NewReport judges checks: OK unless one failed (warnings are allowed).
func NewReport(checks []Check) Report {
	r := Report{OK: true, Checks: checks}
	if r.Checks == nil {
		r.Checks = []Check{}
	}
	for _, c := range checks {
		if c.Status == Fail {
			r.OK = false
		}
	}
	return r
}

// Names returns the names of the checks with status s, in order.
func (r Report) Names(s Status) []string {
	var out []string
	for _, c := range r.Checks {
		if c.Status == s {
			out = append(out, c.Name)
		}
	}
	return out
}

// Passed, Warning and Failed make a check that went so: the checks of
// this package and of the engine's own (clustercheck, githubcheck).
func Passed(name, detail string) Check { return Check{Name: name, Status: OK, Detail: detail} }

// Warning is a check worth fixing; the program works without.
func Warning(name, detail, fix string) Check {
	return Check{Name: name, Status: Warn, Detail: detail, Fix: fix}
}

// Failed is a check the program does not work without.
func Failed(name, detail, fix string) Check {
	return Check{Name: name, Status: Fail, Detail: detail, Fix: fix}
}

// FixOf is err's hint when it carries one, else fallback: the errors of the
// programs' own parts already say what to do.
func FixOf(err error, fallback string) string {
	var e *errs.Error
	if errors.As(err, &e) && e.Hint != "" {
		return e.Hint
	}
	return fallback
}

// The short names this package's checks use.
var (
	ok    = Passed
	warn  = Warning
	fail  = Failed
	fixOf = FixOf
)
