package app

import (
	"strings"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// DoctorLong is the part of both doctor commands' help that they share.
const DoctorLong = `Each check prints its result (ok, warn, FAIL) and, when it warns or fails,
the fix: a command to run or a setting to change. Every probe is bounded
(socket about 1 s, HTTP about 2 s, tmux about 2 s), so a hung part shows as a
failed check. The exit status is 0 when no check failed (warnings allowed),
8 (unavailable) when one did. --json prints
{"ok": bool, "checks": [{"name", "status": "ok|warn|fail", "detail", "fix"}]}.
docs/doctor.md describes each check.`

// DoctorConfig is the configuration both doctor commands check with, and
// the check of it: an invalid file is reported (an invalid policy profile
// among others), and the rest is checked with the defaults and the
// environment's State Hub, as status does. It, Doctor and printDoctor are
// functions of the App rather than its methods: only the two doctor commands
// use them.
func DoctorConfig(a *App, p paths.Paths) (*config.Loaded, doctor.Check) {
	cfg, err := a.Config()
	check := doctor.Config(a.Name(), cfg, err, p.ConfigFile)
	if err != nil {
		cfg = config.Defaults(p)
		if p.StateHubAPIBase != "" {
			cfg.StateHub.APIBase = p.StateHubAPIBase
		}
	}
	return cfg, check
}

// Doctor prints the checks, as text or as one JSON document, and returns
// the error that gives the exit status: nil when none failed.
func Doctor(a *App, checks []doctor.Check) error {
	r := doctor.NewReport(checks)
	if a.JSON {
		if err := a.PrintJSON(r); err != nil {
			return err
		}
	} else {
		printDoctor(a, r)
	}
	failed := r.Names(doctor.Fail)
	if len(failed) == 0 {
		return nil
	}
	return errs.New(errs.Unavailable, "%d %s failed: %s", len(failed), english.PluralWord(len(failed), "check", ""), strings.Join(failed, ", ")).
		WithHint("each failed check says its fix")
}

// printDoctor writes a line per check, its fix under it, and a count. With
// --quiet only the checks that warn or fail are written.
func printDoctor(a *App, r doctor.Report) {
	width := 0
	for _, c := range r.Checks {
		width = max(width, len(c.Name))
	}
	for _, c := range r.Checks {
		if a.Quiet && c.Status == doctor.OK {
			continue
		}
		status := string(c.Status)
		if c.Status == doctor.Fail {
			status = "FAIL"
		}
		a.Printf("%-4s  %-*s  %s\n", status, width, c.Name, c.Detail)
		if c.Fix != "" {
			a.Printf("%-4s  %-*s  fix: %s\n", "", width, "", c.Fix)
		}
	}
	if a.Quiet {
		return
	}
	failed, warned := len(r.Names(doctor.Fail)), len(r.Names(doctor.Warn))
	a.Printf("%s doctor: %d %s failed, %d %s, %d ok\n", a.Name(), failed, english.PluralWord(failed, "check", ""), warned,
		english.PluralWord(warned, "warning", ""), len(r.Checks)-failed-warned)
}
