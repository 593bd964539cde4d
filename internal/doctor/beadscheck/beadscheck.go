// Package beadscheck holds the doctor's checks of beads as State Hub
// ([statehub] kind = "beads"): which bd runs and whether the driver reads
// its version, which repos' databases are watched, which are not and why,
// and that each database reads. Apart from internal/doctor, which is
// tamq's too: the beads driver is the engine's alone.
package beadscheck

import (
	"context"
	"fmt"
	"os/exec"
	"strings"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
)

// Run checks beads as the engine reads it, through d, the driver of cfg.
func Run(ctx context.Context, d *beads.Driver, cfg *config.Loaded) []doctor.Check {
	version := versionCheck(ctx, d, cfg)
	if version.Status == doctor.Fail {
		return []doctor.Check{version}
	}
	return []doctor.Check{version, databasesCheck(ctx, d, cfg)}
}

// versionCheck says which bd runs and whether the driver reads it.
func versionCheck(ctx context.Context, d *beads.Driver, cfg *config.Loaded) doctor.Check {
	command := cfg.StateHub.Beads.Command
	path, err := exec.LookPath(command)
	if err != nil {
		return doctor.Failed("statehub", fmt.Sprintf("bd (statehub.beads.command %q) cannot be found: %v", command, err),
			"install bd "+beads.TestedVersion+" (`scripts/install-bd` builds it), or set statehub.beads.command in "+cfg.File)
	}
	ctx, cancel := context.WithTimeout(ctx, doctor.HTTPTimeout)
	defer cancel()
	v, err := d.Version(ctx)
	switch {
	case err != nil:
		return doctor.Failed("statehub", fmt.Sprintf("%s does not say its version: %v", path, err), doctor.FixOf(err, "run `"+path+" version` yourself"))
	case !beads.Supported(v):
		return doctor.Failed("statehub", fmt.Sprintf("%s is bd %s; the driver reads bd 1.x (tested with %s)", path, v, beads.TestedVersion),
			"install bd "+beads.TestedVersion+" (`scripts/install-bd`; `go install …@latest` gives the old 0.22)")
	case v != beads.TestedVersion:
		return doctor.Warning("statehub", fmt.Sprintf("%s is bd %s; the driver is tested with %s (kind beads)", path, v, beads.TestedVersion),
			"it likely works; `make test-trackers` with BD_VERSION=v"+v+" says whether it does")
	}
	return doctor.Passed("statehub", fmt.Sprintf("%s is bd %s, the version the driver is tested with (kind beads)", path, v))
}

// databasesCheck reads every watched database once, and names the repos
// whose database is refused (others may write it) or that have none.
func databasesCheck(ctx context.Context, d *beads.Driver, cfg *config.Loaded) doctor.Check {
	const name = "beads-repos"
	_, err := d.Board(ctx)
	r := d.Report()
	var refused, none []string
	for _, w := range r.NotWatched {
		if w.Elsewhere {
			none = append(none, w.Repo)
		} else {
			refused = append(refused, w.Repo+": "+w.Problem)
		}
	}
	switch {
	case len(refused) > 0:
		return doctor.Failed(name, "databases not trusted: "+strings.Join(refused, "; "), "make them yours and not writable by others (`chmod go-w REPO/.beads`)")
	case err != nil:
		return doctor.Failed(name, err.Error(), doctor.FixOf(err, "run `bd list` in the repo named"))
	case len(r.Watched) == 0:
		return doctor.Warning(name, "no gita repo has a .beads/ database: nothing is watched", "run `bd init` in each repo whose work beads tracks")
	}
	detail := fmt.Sprintf("%d %s watched", len(r.Watched), english.PluralWord(len(r.Watched), "database", "databases"))
	if len(none) > 0 {
		detail += fmt.Sprintf("; %d %s without one (%s)", len(none), english.PluralWord(len(none), "repo", "repos"), strings.Join(none, ", "))
	}
	return doctor.Passed(name, detail)
}
