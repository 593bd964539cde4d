// Package e2e runs both programs end to end through testscript: the real
// binaries, built as the Makefile builds them (a race-built test binary
// re-executed for every command costs ten times the start), real files,
// private XDG directories per script.
package e2e

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/rogpeppe/go-internal/testscript"

	enginestore "github.com/tmux-amq/tamq/internal/engine/store"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	tamqstore "github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestScripts(t *testing.T) {
	// testscript's mkdir and cp make directories 0777 and files 0666 less
	// the umask: under a umask of 002 (many desktops) they would be
	// group-writable, and the programs refuse such config files and gita
	// registries (internal/trust). Not restored: the scripts run after this
	// function returns.
	syscall.Umask(0o022)
	bin := testutil.Binaries(t)
	testscript.Run(t, testscript.Params{
		Dir:                 "testdata/script",
		RequireExplicitExec: true,
		Setup: func(env *testscript.Env) error {
			work := env.WorkDir
			env.Setenv("PATH", bin+string(os.PathListSeparator)+env.Getenv("PATH"))
			// BINDIR holds the programs alone: PATH=$BINDIR is a PATH without tmux.
			env.Setenv("BINDIR", bin)
			env.Setenv("HOME", filepath.Join(work, "home"))
			env.Setenv("XDG_CONFIG_HOME", filepath.Join(work, "config"))
			env.Setenv("XDG_STATE_HOME", filepath.Join(work, "state"))
			env.Setenv("XDG_RUNTIME_DIR", filepath.Join(work, "run"))
			// testscript passes on little of the environment: tmux's socket
			// directory (which `make test` moves out of the user's) goes
			// with the scripts' tmux commands.
			if dir := os.Getenv("TMUX_TMPDIR"); dir != "" {
				env.Setenv("TMUX_TMPDIR", dir)
			}
			// Both programs look for State Hub at the spec's default, a
			// loopback port where the user's own may listen: each config
			// file (the script's, or one made here) names a socket of the
			// script's instead. config.txtar removes them to see defaults.
			for _, program := range []string{"tamq", "coordination-engine"} {
				file := filepath.Join(work, "config", program, "config.toml")
				b, err := os.ReadFile(file)
				if err != nil && !os.IsNotExist(err) {
					return err
				}
				if err := os.MkdirAll(filepath.Dir(file), 0o700); err != nil {
					return err
				}
				sock := "unix://" + filepath.Join(work, "run", "statehub.sock")
				if err := os.WriteFile(file, []byte(testutil.WithStateHub(string(b), sock)), 0o600); err != nil {
					return err
				}
			}
			// A script that fails midway must not leave its service running.
			env.Defer(func() { killService(filepath.Join(work, "state", "tamq", "tamq.lock")) })
			return nil
		},
		Cmds: map[string]func(ts *testscript.TestScript, neg bool, args []string){
			"exit":     cmdExit,
			"mkrepo":   cmdMkrepo,
			"gita-add": cmdGitaAdd,
			"dbinit":   cmdDBInit,
			"mode":     cmdMode,
			"unescape": cmdUnescape,
			"sql":      cmdSQL,
			"waitfile": cmdWaitFile,
		},
	})
}

// killService kills the tamq service that holds lockFile, if one still runs.
func killService(lockFile string) {
	pid := lockfile.HolderPID(lockFile)
	if pid <= 0 {
		return
	}
	exe, err := os.Readlink(fmt.Sprintf("/proc/%d/exe", pid))
	if err == nil && filepath.Base(exe) == "tamq" {
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// exit N PROG [ARGS...] runs PROG and requires exit status N; stdout and stderr
// are then available to the stdout and stderr commands.
func cmdExit(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) < 2 {
		ts.Fatalf("usage: exit N program [args...]")
	}
	want, err := strconv.Atoi(args[0])
	if err != nil {
		ts.Fatalf("exit: bad status %q", args[0])
	}
	err = ts.Exec(args[1], args[2:]...)
	got := 0
	var ee *exec.ExitError
	switch {
	case errors.As(err, &ee):
		got = ee.ExitCode()
	case err != nil:
		ts.Fatalf("exit: %v", err)
	}
	if got != want {
		ts.Fatalf("%s exited %d, want %d", args[1], got, want)
	}
}

// mkrepo DIR... makes each DIR a real git repository.
func cmdMkrepo(ts *testscript.TestScript, neg bool, args []string) {
	for _, dir := range args {
		dir = ts.MkAbs(dir)
		if err := os.MkdirAll(dir, 0o755); err != nil {
			ts.Fatalf("mkrepo: %v", err)
		}
		if out, err := exec.Command("git", "init", "-q", dir).CombinedOutput(); err != nil {
			ts.Fatalf("git init %s: %v\n%s", dir, err, out)
		}
	}
}

// gita-add PATH [NAME] appends a row to repos.csv exactly as gita 0.16 writes it:
// Python's csv writer with CRLF line ends and minimal quoting. NAME defaults to
// the directory's base name, as gita derives it.
func cmdGitaAdd(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: gita-add PATH [NAME]")
	}
	path := ts.MkAbs(args[0])
	name := filepath.Base(path)
	if len(args) == 2 {
		name = args[1]
	}
	dir := filepath.Join(ts.Getenv("XDG_CONFIG_HOME"), "gita")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		ts.Fatalf("gita-add: %v", err)
	}
	f, err := os.OpenFile(filepath.Join(dir, "repos.csv"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		ts.Fatalf("gita-add: %v", err)
	}
	defer f.Close()
	if _, err := f.WriteString(testutil.GitaRow(path, name)); err != nil {
		ts.Fatalf("gita-add: %v", err)
	}
}

// dbinit PROGRAM [USER_VERSION] creates PROGRAM's database with its migrations, as
// the service will at start; with USER_VERSION it then forces that schema version
// (to stand for a database written by a newer binary).
func cmdDBInit(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) < 1 || len(args) > 2 {
		ts.Fatalf("usage: dbinit tamq|coordination-engine [user_version]")
	}
	var o sqlitedb.Options
	switch args[0] {
	case "tamq":
		o = sqlitedb.Options{Path: filepath.Join(ts.Getenv("XDG_STATE_HOME"), "tamq", "tamq.sqlite3"), Migrations: tamqstore.Migrations}
	case "coordination-engine":
		o = sqlitedb.Options{Path: filepath.Join(ts.Getenv("XDG_STATE_HOME"), "coordination-engine", "coordination.sqlite3"), Migrations: enginestore.Migrations}
	default:
		ts.Fatalf("dbinit: unknown program %q", args[0])
	}
	o.BackupDir = filepath.Join(filepath.Dir(o.Path), "backups")
	db, err := sqlitedb.Open(context.Background(), o)
	if err != nil {
		ts.Fatalf("dbinit: %v", err)
	}
	defer db.Close()
	if len(args) == 2 {
		v, err := strconv.Atoi(args[1])
		if err != nil {
			ts.Fatalf("dbinit: %v", err)
		}
		if _, err := db.Writer.Exec(fmt.Sprintf("PRAGMA user_version = %d", v)); err != nil {
			ts.Fatalf("dbinit: %v", err)
		}
	}
}

// mode PERM PATH requires PATH's permission bits to be PERM (octal).
func cmdMode(ts *testscript.TestScript, neg bool, args []string) {
	if len(args) != 2 {
		ts.Fatalf("usage: mode PERM PATH")
	}
	want, err := strconv.ParseUint(args[0], 8, 32)
	if err != nil {
		ts.Fatalf("mode: %v", err)
	}
	fi, err := os.Stat(ts.MkAbs(args[1]))
	if err != nil {
		ts.Fatalf("mode: %v", err)
	}
	if got := uint64(fi.Mode().Perm()); (got == want) == neg {
		ts.Fatalf("%s has mode %o, want %s%o", args[1], got, map[bool]string{true: "not ", false: ""}[neg], want)
	}
}

// unescape SRC DST writes SRC's text to DST with $VARS expanded and Go escapes
// (\x1b, \u202e, \a, \r\n...) turned into the bytes they stand for, and
// without SRC's own line ends: scripts keep the hostile bytes they test
// readable.
func cmdUnescape(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 2 {
		ts.Fatalf("usage: unescape src dst")
	}
	text := os.Expand(ts.ReadFile(args[0]), ts.Getenv)
	var out strings.Builder
	for line := range strings.Lines(text) {
		line = strings.TrimSuffix(line, "\n")
		u, err := strconv.Unquote(`"` + strings.ReplaceAll(line, `"`, `\"`) + `"`)
		if err != nil {
			ts.Fatalf("unescape %q: %v", line, err)
		}
		out.WriteString(u)
	}
	dst := ts.MkAbs(args[1])
	if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
		ts.Fatalf("unescape: %v", err)
	}
	if err := os.WriteFile(dst, []byte(out.String()), 0o644); err != nil {
		ts.Fatalf("unescape: %v", err)
	}
}

// sql FILE runs the statements in FILE on tamq's database (create it with
// dbinit first), to put there rows no command would write.
func cmdSQL(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: sql file")
	}
	db, err := sqlitedb.Open(context.Background(), sqlitedb.Options{
		Path: filepath.Join(ts.Getenv("XDG_STATE_HOME"), "tamq", "tamq.sqlite3"), Migrations: tamqstore.Migrations,
	})
	if err != nil {
		ts.Fatalf("sql: %v", err)
	}
	defer db.Close()
	if _, err := db.Writer.Exec(ts.ReadFile(args[0])); err != nil {
		ts.Fatalf("sql: %v", err)
	}
}

// waitfile PATH waits until PATH exists (a background program's sign that it
// is ready), for at most 30 seconds; PATH's directory must exist.
func cmdWaitFile(ts *testscript.TestScript, neg bool, args []string) {
	if neg || len(args) != 1 {
		ts.Fatalf("usage: waitfile PATH")
	}
	if err := testutil.AwaitFile(ts.MkAbs(args[0]), 30*time.Second); err != nil {
		ts.Fatalf("%v", err)
	}
}
