package beads

import (
	"bytes"
	"context"
	"errors"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// runner runs bd: one command at a time per database (bd's embedded Dolt
// takes the database's lock; two at once wait on each other or fail),
// bounded in time and in what it prints, with an environment of its own.
type runner struct {
	command string
	timeout time.Duration
	// home is a private HOME for bd: its user config and caches stay out
	// of the user's, and nothing of the user's bd settings (a Dolt server
	// to talk to, telemetry) changes what the engine reads.
	home string

	mu    sync.Mutex
	locks map[string]*sync.Mutex
	// runs counts the bd processes started (docs/performance.md).
	runs atomic.Int64
}

// maxOutput bounds what the driver reads of one bd command: 200 issues
// print some 200 KB; a database a hundred times that is not read whole.
const maxOutput = 64 << 20

// errNoBD is the error of a bd that cannot be started.
var errNoBD = errors.New("bd cannot be run")

// startable says whether bd can be started, without starting it (a look
// up of the command on PATH).
func (r *runner) startable() error {
	if _, err := exec.LookPath(r.command); err != nil {
		return r.cannotStart(err)
	}
	return nil
}

// cannotStart is the one error of a bd that cannot be started.
func (r *runner) cannotStart(err error) error {
	return errs.Wrap(errs.Unavailable, errNoBD, "beads: cannot run %s (%v)", textsafe.Escape(r.command), err).
		WithHint("install bd (scripts/install-bd) or set statehub.beads.command")
}

func (r *runner) lock(dir string) func() {
	r.mu.Lock()
	if r.locks == nil {
		r.locks = map[string]*sync.Mutex{}
	}
	l := r.locks[dir]
	if l == nil {
		l = &sync.Mutex{}
		r.locks[dir] = l
	}
	r.mu.Unlock()
	l.Lock()
	return l.Unlock
}

// env is bd's environment: PATH (bd finds git there), a private HOME, the
// database named (BEADS_DIR, so bd never walks up to another one), no
// prompt, no usage metrics, no Dolt server, and who acts. Nothing else of
// the engine's environment (its tokens, the user's BD_ and BEADS_
// settings) reaches bd.
func (r *runner) env(repo string) []string {
	return []string{
		"PATH=" + os.Getenv("PATH"),
		"HOME=" + r.home,
		"XDG_CONFIG_HOME=" + filepath.Join(r.home, "config"),
		"XDG_CACHE_HOME=" + filepath.Join(r.home, "cache"),
		"BEADS_DIR=" + filepath.Join(repo, ".beads"),
		"BD_NON_INTERACTIVE=1",
		// bd reports usage to its authors unless told not to (its metrics
		// are on by default); nothing of the user's work leaves the
		// machine through the engine.
		"BD_DISABLE_METRICS=1",
		"BD_DISABLE_EVENT_FLUSH=1",
		"BEADS_DOLT_AUTO_START=0",
		"BD_ACTOR=coordination-engine",
		"BEADS_ACTOR=coordination-engine",
		"LANG=C.UTF-8",
	}
}

// run runs bd with args in repo's directory and returns what it printed on
// stdout. A bd that cannot be started, or runs over its time, is
// unavailable; one that exits non-zero fails with the last line it wrote
// on stderr (escaped: it may quote the tracker's text).
func (r *runner) run(ctx context.Context, repo string, args ...string) ([]byte, error) {
	defer r.lock(repo)()
	return r.runLocked(ctx, repo, args...)
}

// runLocked is run with repo's lock held by the caller.
func (r *runner) runLocked(ctx context.Context, repo string, args ...string) ([]byte, error) {
	if err := os.MkdirAll(r.home, 0o700); err != nil {
		return nil, errs.Wrap(errs.Storage, err, "beads: cannot make bd's home %s", r.home)
	}
	ctx, cancel := context.WithTimeout(ctx, r.timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, r.command, args...)
	cmd.Dir = repo
	cmd.Env = r.env(repo)
	cmd.WaitDelay = time.Second
	var out bytes.Buffer
	var stderr tail
	cmd.Stdout = &limited{w: &out, left: maxOutput}
	cmd.Stderr = &stderr
	r.runs.Add(1)
	err := cmd.Run()
	what := "bd " + args[0]
	switch {
	case ctx.Err() != nil && errors.Is(ctx.Err(), context.DeadlineExceeded):
		return nil, errs.New(errs.Unavailable, "beads: %s in %s took over %s", what, repo, r.timeout)
	case errors.Is(err, exec.ErrNotFound), errors.Is(err, os.ErrNotExist), errors.Is(err, os.ErrPermission):
		return nil, r.cannotStart(err)
	case err != nil && ctx.Err() != nil:
		return nil, ctx.Err()
	case err != nil:
		msg := stderr.last()
		code, lower := errs.Internal, strings.ToLower(msg)
		switch {
		case strings.Contains(lower, "not found") || strings.Contains(lower, "no issue"):
			code = errs.NotFound
		case strings.Contains(lower, "blocked by open issues"):
			code = errs.Conflict // bd closes nothing whose blockers are open
		}
		return nil, errs.New(code, "beads: %s in %s failed: %s", what, repo, textsafe.Escape(msg))
	case out.Len() >= maxOutput:
		return nil, errs.New(errs.Internal, "beads: %s in %s printed over %d bytes", what, repo, maxOutput)
	}
	return out.Bytes(), nil
}

// limited writes at most left bytes to w and discards the rest, so a bd
// that prints without end is cut off, not held in memory.
type limited struct {
	w    io.Writer
	left int
}

func (l *limited) Write(p []byte) (int, error) {
	n := len(p)
	if len(p) > l.left {
		p = p[:l.left]
	}
	l.left -= len(p)
	if len(p) > 0 {
		l.w.Write(p)
	}
	return n, nil
}

// tail keeps the last 4 KiB bd wrote on stderr.
type tail struct{ b []byte }

func (t *tail) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > 4096 {
		t.b = t.b[len(t.b)-4096:]
	}
	return len(p), nil
}

// last is its last non-empty line.
func (t *tail) last() string {
	lines := strings.Split(strings.TrimSpace(string(t.b)), "\n")
	s := strings.TrimSpace(lines[len(lines)-1])
	if s == "" {
		return "(it said nothing)"
	}
	return s
}
