package doctor

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
)

// MinTmux is the oldest tmux tamq supports (README, scripts/install-deps):
// tamq relies on 3.2's window user options and display formats.
var MinTmux = [2]int{3, 2}

const installTmux = "install tmux 3.2 or newer (e.g. `sudo apt-get install tmux`), or put the directory that holds it in PATH"

// Tmux checks that tmux is in PATH and new enough, asking `tmux -V`.
func Tmux(ctx context.Context) Check {
	const name = "tmux"
	path, err := exec.LookPath("tmux")
	if err != nil {
		return fail(name, "tmux is not installed (not found in PATH): tamq opens every window and writes every message through it", installTmux)
	}
	ctx, cancel := context.WithTimeout(ctx, TmuxTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, "-V")
	cmd.WaitDelay = time.Second
	out, err := cmd.Output()
	if err != nil {
		return fail(name, fmt.Sprintf("`%s -V` failed: %v", path, err), installTmux)
	}
	version, supported, known := TmuxVersion(string(out))
	switch {
	case !known:
		return warn(name, fmt.Sprintf("cannot tell the version of %s from %q", path, strings.TrimSpace(string(out))),
			"make sure it is tmux 3.2 or newer")
	case !supported:
		return fail(name, fmt.Sprintf("tmux %s at %s is older than %d.%d, the oldest tamq supports", version, path, MinTmux[0], MinTmux[1]),
			installTmux)
	}
	return ok(name, fmt.Sprintf("tmux %s at %s (%d.%d or newer is needed)", version, path, MinTmux[0], MinTmux[1]))
}

// TmuxVersion reads `tmux -V` ("tmux 3.3a", "tmux next-3.4", "tmux master")
// and says whether it is at least MinTmux; known is false when the line
// names no version this can compare (a distribution's own numbering).
func TmuxVersion(out string) (version string, supported, known bool) {
	f := strings.Fields(out)
	if len(f) != 2 || f[0] != "tmux" {
		return "", false, false
	}
	version = f[1]
	v := strings.TrimPrefix(version, "next-")
	if v == "master" {
		// Built from the development branch: newer than any release.
		return version, true, true
	}
	majorText, rest, found := strings.Cut(v, ".")
	major, err := strconv.Atoi(majorText)
	if !found || err != nil {
		return version, false, false
	}
	// The minor number may carry a letter: 3.3a is a patch release of 3.3.
	digits := len(rest) - len(strings.TrimLeft(rest, "0123456789"))
	minor, err := strconv.Atoi(rest[:digits])
	if err != nil {
		return version, false, false
	}
	return version, major > MinTmux[0] || (major == MinTmux[0] && minor >= MinTmux[1]), true
}

// GitaTool checks that gita itself is installed. A warning only: the
// programs read gita's registry without it, but a user needs it to add,
// rename or remove repositories.
func GitaTool() Check {
	const name = "gita"
	path, err := exec.LookPath("gita")
	if err != nil {
		return warn(name, "gita is not installed (not found in PATH): its registry is read without it, but you need it to register repositories",
			"install it: `pipx install gita` (or `pip install --user gita`)")
	}
	return ok(name, "gita at "+path)
}

// Config checks that the program's config file loads: unknown keys, bad
// values and an invalid policy profile are refused there.
func Config(program string, cfg *config.Loaded, err error, file string) Check {
	const name = "config"
	if err != nil {
		return fail(name, err.Error(), fixOf(err, fmt.Sprintf("fix %s (`%s config validate` names the problem)", file, program)))
	}
	where := cfg.File
	if !cfg.FileExists {
		where = "no file at " + cfg.File + ": the defaults"
	}
	return ok(name, fmt.Sprintf("%s, policy profile %s", where, cfg.ProfileRef()))
}

// Registry checks that the gita registry is found and readable, where
// internal/gita finds it.
func Registry(reg *gita.Registry, err error) Check {
	const name = "gita-registry"
	if err != nil {
		return fail(name, err.Error(), fixOf(err, "register repositories with `gita add <path>`"))
	}
	return ok(name, fmt.Sprintf("%s, %d repos", reg.ReposFile, len(reg.Repos)))
}

// Repos checks the registered repositories' paths: one that is gone or not
// a directory fails (messages to it cannot be delivered and its window cannot
// open); a row whose directory is not a git repository only warns, as gita
// itself skips it.
func Repos(reg *gita.Registry) Check {
	const name = "repos"
	var gone, gitless []string
	var goneRows, gitlessRows []gita.Unregistered
	for _, u := range reg.Unregistered {
		what := fmt.Sprintf("%s (%s: %s)", u.Repo.Name, u.Repo.Path, u.Reason)
		fi, err := os.Stat(u.Repo.Path)
		switch {
		case !filepath.IsAbs(u.Repo.Path):
			gitless, gitlessRows = append(gitless, what), append(gitlessRows, u)
		case errors.Is(err, os.ErrNotExist):
			gone, goneRows = append(gone, fmt.Sprintf("%s (%s does not exist)", u.Repo.Name, u.Repo.Path)), append(goneRows, u)
		case err == nil && !fi.IsDir():
			gone, goneRows = append(gone, fmt.Sprintf("%s (%s is not a directory)", u.Repo.Name, u.Repo.Path)), append(goneRows, u)
		default:
			gitless, gitlessRows = append(gitless, what), append(gitlessRows, u)
		}
	}
	// Not `gita rm NAME`: gita hides these rows, so it answers that NAME does
	// not exist. The lines of repos.csv to delete are the hint `tamq open` gives.
	switch {
	case len(gone) > 0:
		return fail(name, "registered repositories whose path is gone: "+strings.Join(gone, ", "),
			fmt.Sprintf("put each repository back at its path, or %s (one that moved: then `gita add` its new path)",
				reg.RemoveRowsHint(goneRows)))
	case len(gitless) > 0:
		return warn(name, "registry rows that are not git repositories, which gita and tamq skip: "+strings.Join(gitless, ", "),
			fmt.Sprintf("make each a git repository again, or %s", reg.RemoveRowsHint(gitlessRows)))
	}
	return ok(name, fmt.Sprintf("%d repos, each a git repository", len(reg.Repos)))
}
