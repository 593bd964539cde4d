// Command homeguard is `make test`'s check that a test run never writes into
// the user's own state, config, cache or runtime directories, nor talks to
// the user's default tmux server. The Makefile runs the tests with HOME,
// XDG_CONFIG_HOME, XDG_STATE_HOME, XDG_CACHE_HOME, XDG_DATA_HOME,
// XDG_RUNTIME_DIR and TMUX_TMPDIR pointed into a fresh directory (a decoy
// home), so a test that forgets to give a program its private directories
// writes into the decoy rather than into the user's files; and then:
//
//	homeguard snapshot FILE      (before the run, in the user's environment)
//	    writes which of the user's paths of ours exist
//	homeguard check DECOY FILE   (after the run, in the user's environment)
//	    fails, naming them, when the decoy holds a file of ours (a test used
//	    the default paths) or a path of ours in the user's own directories
//	    appeared during the run (something ignored the environment, as a
//	    hard-coded /tmp/tamq-UID would)
//
// Only appearances count in the user's directories: a tamq of the user's
// may run during the tests and keeps writing to its own files.
package main

import (
	"bufio"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
)

func main() {
	var err error
	switch {
	case len(os.Args) == 3 && os.Args[1] == "snapshot":
		err = snapshot(os.Args[2], os.Getenv)
	case len(os.Args) == 4 && os.Args[1] == "check":
		var found []string
		found, err = check(os.Args[2], os.Args[3], os.Getenv)
		if err == nil && len(found) > 0 {
			fmt.Fprintln(os.Stderr, "homeguard: the tests wrote where they must not (into the user's own directories, or into the decoy home that stands for them):")
			for _, f := range found {
				fmt.Fprintln(os.Stderr, "  "+f)
			}
			fmt.Fprintln(os.Stderr, "homeguard: give the program under test private directories (testutil.NewEnv, t.TempDir)")
			os.Exit(1)
		}
	default:
		err = errors.New("usage: homeguard snapshot FILE | homeguard check DECOY FILE")
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "homeguard:", err)
		os.Exit(2)
	}
}

// programs are the names both programs give their directories under the XDG
// base directories (internal/paths).
var programs = []string{"tamq", "coordination-engine"}

// userPaths are the paths of ours in the directories getenv names, as the
// programs resolve them when nothing overrides them (internal/paths), with
// the agents' settings that `tamq agent setup` edits and tmux's default
// socket.
func userPaths(getenv func(string) string) []string {
	home := getenv("HOME")
	dir := func(name, fallback string) string {
		if d := getenv(name); filepath.IsAbs(d) {
			return d
		}
		if home == "" {
			return ""
		}
		return filepath.Join(home, fallback)
	}
	var out []string
	for _, base := range []string{dir("XDG_CONFIG_HOME", ".config"), dir("XDG_STATE_HOME", ".local/state"),
		dir("XDG_CACHE_HOME", ".cache"), dir("XDG_DATA_HOME", ".local/share")} {
		for _, p := range programs {
			if base != "" {
				out = append(out, filepath.Join(base, p))
			}
		}
	}
	if run := getenv("XDG_RUNTIME_DIR"); filepath.IsAbs(run) {
		for _, p := range programs {
			out = append(out, filepath.Join(run, p+".sock"))
		}
	}
	tmp := getenv("TMPDIR")
	if !filepath.IsAbs(tmp) {
		tmp = "/tmp"
	}
	out = append(out, filepath.Join(tmp, "tamq-"+strconv.Itoa(os.Getuid())))
	tmuxTmp := getenv("TMUX_TMPDIR")
	if !filepath.IsAbs(tmuxTmp) {
		tmuxTmp = "/tmp"
	}
	out = append(out, filepath.Join(tmuxTmp, "tmux-"+strconv.Itoa(os.Getuid()), "default"))
	if home != "" {
		out = append(out, filepath.Join(home, ".claude"), filepath.Join(home, ".codex"))
	}
	return out
}

// existing are those of paths that exist.
func existing(paths []string) []string {
	var out []string
	for _, p := range paths {
		if _, err := os.Lstat(p); err == nil {
			out = append(out, p)
		}
	}
	return out
}

func snapshot(file string, getenv func(string) string) error {
	var b strings.Builder
	for _, p := range existing(userPaths(getenv)) {
		b.WriteString(p + "\n")
	}
	return os.WriteFile(file, []byte(b.String()), 0o600)
}

// check returns the paths of ours in the decoy home, and those of the user's
// that exist now but did not at the snapshot.
func check(decoy, file string, getenv func(string) string) ([]string, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	var before []string
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		before = append(before, sc.Text())
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	found, err := inDecoy(decoy)
	if err != nil {
		return nil, err
	}
	for _, p := range existing(userPaths(getenv)) {
		if !slices.Contains(before, p) {
			found = append(found, p+" (appeared during the run)")
		}
	}
	return found, nil
}

// inDecoy lists what the decoy home holds of ours: every path of ours the
// programs would use had the tests' environment been the user's. The
// decoy's layout is the Makefile's (DecoyEnv).
func inDecoy(decoy string) ([]string, error) {
	if _, err := os.Stat(decoy); err != nil {
		return nil, err
	}
	env := decoyEnv(decoy)
	// A program that read HOME alone (and not XDG_*) would write below the
	// decoy's home: ~/.config/tamq, ~/.local/state/tamq.
	homeOnly := func(k string) string {
		if strings.HasPrefix(k, "XDG_") {
			return ""
		}
		return env(k)
	}
	var paths []string
	for _, p := range append(userPaths(env), userPaths(homeOnly)...) {
		// The private runtime directory is in the user's TMPDIR, which
		// the tests keep: the user's check sees it.
		if strings.HasPrefix(p, decoy+string(filepath.Separator)) && !slices.Contains(paths, p) {
			paths = append(paths, p)
		}
	}
	return existing(paths), nil
}

// decoyEnv is the environment `make test` gives the tests: each directory
// below decoy, as the Makefile's unit target sets them.
func decoyEnv(decoy string) func(string) string {
	vars := map[string]string{
		"HOME":            filepath.Join(decoy, "home"),
		"XDG_CONFIG_HOME": filepath.Join(decoy, "config"),
		"XDG_STATE_HOME":  filepath.Join(decoy, "state"),
		"XDG_CACHE_HOME":  filepath.Join(decoy, "cache"),
		"XDG_DATA_HOME":   filepath.Join(decoy, "data"),
		"XDG_RUNTIME_DIR": filepath.Join(decoy, "run"),
		"TMUX_TMPDIR":     filepath.Join(decoy, "tmux"),
		// Left as the user's: the tests' own temp dirs are there. A private
		// runtime directory made in it is caught by the user's check.
		"TMPDIR": os.Getenv("TMPDIR"),
	}
	return func(k string) string { return vars[k] }
}
