package tmux

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// CheckSessionName rejects names tmux would silently change: it replaces "."
// and ":" with "_", after which "=NAME" targets no longer find the session.
func CheckSessionName(name string) error {
	if name == "" || strings.ContainsAny(name, ".:") {
		return errs.New(errs.Usage, "tmux session name %q is empty or contains '.' or ':', which tmux does not keep", name)
	}
	return nil
}

// EnsureSession starts the server if needed and makes sure the session exists,
// reporting whether this call created it. dir, if not empty, is the session's
// working directory.
func (s Server) EnsureSession(ctx context.Context, name, dir string) (created bool, err error) {
	if err := CheckSessionName(name); err != nil {
		return false, err
	}
	if s.Socket != "" {
		// tmux makes the directory for -L sockets but not for -S ones; the
		// default server chosen as a path must still start like tmux would.
		if err := os.Mkdir(filepath.Dir(s.Socket), 0o700); err != nil && !errors.Is(err, os.ErrExist) {
			return false, errs.Wrap(errs.Unavailable, err, "tmux %s: cannot make the socket directory", s)
		}
	}
	args := []string{"new-session", "-d", "-s", literal(name), "-x", "200", "-y", "50"}
	if dir != "" {
		args = append(args, "-c", literal(dir))
	}
	// Creating and treating "duplicate" as success is one call and has no race
	// between checking and creating.
	if _, err := s.Run(ctx, nil, args...); err != nil {
		if strings.Contains(err.Error(), "duplicate session: ") {
			return false, nil
		}
		return false, err
	}
	return true, nil
}

// Window is one window as ListWindows sees it. The pane fields describe the
// window's active pane; windows tamq opens have only one.
type Window struct {
	ID      string // @N
	Name    string
	Session string
	PaneID  string // %N
	PanePID int
	Dead    bool // pane_dead: the process exited (needs remain-on-exit on)
	// DeadStatus is the exit status of a dead pane's process, 128+n for a
	// signal n as a shell says it; -1 while it runs or when tmux does not know.
	DeadStatus int
	Repo       string // the @tamq_repo option; "" for windows tamq did not open
}

// tmux prints names raw, control characters included, so no separator is safe
// in the free-text fields. The fixed fields come first with the byte lengths
// (#{n:...}) of the free-text ones, which follow unseparated.
const listFormat = "#{window_id}\x1f#{pane_id}\x1f#{pane_pid}\x1f#{pane_dead}\x1f" + deadFormat + "\x1f" +
	"#{n:session_name}\x1f#{n:window_name}\x1f#{n:" + RepoOption + "}\x1f" +
	"#{session_name}#{window_name}#{" + RepoOption + "}"

// deadFormat is how a dead pane's process ended: "status:" when it exited,
// ":signal" when a signal ended it (tmux 3.3; 3.2 leaves it empty), then
// the status a broker set in ExitOption as it exited. tmux 3.3a does not
// always learn how a pane's process ended (about one pane in fifteen that
// exits at once shows dead with neither a status nor a signal, for good),
// so the broker, which waited for its agent, says it too.
const deadFormat = "#{pane_dead_status}:#{pane_dead_signal}:#{" + ExitOption + "}"

// ExitOption is the pane user option a broker sets to its agent's exit
// status just before it exits itself.
const ExitOption = "@tamq_exit"

// parseDead reads deadFormat as a shell's exit status, -1 when unknown.
func parseDead(f string) int {
	status, rest, _ := strings.Cut(f, ":")
	signal, own, _ := strings.Cut(rest, ":")
	if n, err := strconv.Atoi(status); err == nil && n >= 0 && n <= 255 {
		return n
	}
	if n, err := strconv.Atoi(signal); err == nil && n > 0 && n < 128 {
		return 128 + n
	}
	if n, err := strconv.Atoi(own); err == nil && n >= 0 && n <= 255 {
		return n
	}
	return -1
}

// SetPaneExit records status in the pane's ExitOption, for a broker about
// to exit with it.
func (s Server) SetPaneExit(ctx context.Context, paneID string, status int) error {
	if err := checkPane(paneID); err != nil {
		return err
	}
	_, err := s.Run(ctx, nil, "set-option", "-p", "-t", paneID, ExitOption, strconv.Itoa(status))
	return err
}

// PaneExit says whether a pane's process has exited and, when it has, its
// exit status as parseDead reads it.
func (s Server) PaneExit(ctx context.Context, paneID string) (dead bool, status int, err error) {
	out, err := s.Run(ctx, nil, "display-message", "-p", "-t", paneID, "#{pane_dead}\x1f"+deadFormat)
	if err != nil {
		return false, -1, err
	}
	d, st, _ := strings.Cut(strings.TrimSuffix(out, "\n"), "\x1f")
	return d == "1", parseDead(st), nil
}

// ListWindows lists every window of every session in one tmux call. A window
// linked into several sessions appears once per session.
func (s Server) ListWindows(ctx context.Context) ([]Window, error) {
	return s.list(ctx, "list-windows")
}

// ListPanes lists every pane of every window of every session, as
// ListWindows lists their active panes: a process in a split pane runs in
// no pane ListWindows names.
func (s Server) ListPanes(ctx context.Context) ([]Window, error) {
	return s.list(ctx, "list-panes")
}

func (s Server) list(ctx context.Context, command string) ([]Window, error) {
	out, err := s.Run(ctx, nil, command, "-a", "-F", listFormat)
	if err != nil {
		return nil, err
	}
	ws, err := parseWindows(out)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "tmux %s %s: unexpected output", s, command)
	}
	return ws, nil
}

// Snapshot is the server's pid and its windows, read in one tmux call, so
// both describe the same server even if it is replaced meanwhile.
func (s Server) Snapshot(ctx context.Context) (pid int, windows []Window, err error) {
	out, err := s.Run(ctx, nil, "display-message", "-p", "#{pid}", ";", "list-windows", "-a", "-F", listFormat)
	if err != nil {
		return 0, nil, err
	}
	first, rest, _ := strings.Cut(out, "\n")
	if pid, err = strconv.Atoi(first); err != nil {
		return 0, nil, errs.New(errs.Internal, "tmux %s: bad server pid %q", s, first)
	}
	if windows, err = parseWindows(rest); err != nil {
		return 0, nil, errs.Wrap(errs.Internal, err, "tmux %s list-windows: unexpected output", s)
	}
	return pid, windows, nil
}

// parseWindows reads list-windows output in listFormat, one record a window.
func parseWindows(out string) ([]Window, error) {
	var ws []Window
	for out != "" {
		w, rest, err := parseWindow(out)
		if err != nil {
			return nil, err
		}
		ws, out = append(ws, w), rest
	}
	return ws, nil
}

func parseWindow(in string) (Window, string, error) {
	var f [8]string
	for i := range f {
		var ok bool
		if f[i], in, ok = strings.Cut(in, "\x1f"); !ok {
			return Window{}, "", errors.New("missing field")
		}
	}
	var n [3]int
	total := 0
	for i := range n {
		v, err := strconv.Atoi(f[5+i])
		// Each length is checked against what is left before it is added:
		// lengths near the int limit would overflow the sum to a small
		// number and slice out of range.
		if err != nil || v < 0 || v > len(in)-total {
			return Window{}, "", fmt.Errorf("bad length %q", f[5+i])
		}
		n[i] = v
		total += v
	}
	if len(in) < total+1 || in[total] != '\n' {
		return Window{}, "", errors.New("record shorter than its lengths")
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		return Window{}, "", fmt.Errorf("bad pane pid %q", f[2])
	}
	// Ids of another shape mean the records were misread (a length that
	// does not match its text); reading on would take names for ids.
	if !isID(f[0], "@") || !isID(f[1], "%") {
		return Window{}, "", fmt.Errorf("bad window or pane id %q, %q", f[0], f[1])
	}
	return Window{
		ID: f[0], PaneID: f[1], PanePID: pid, Dead: f[3] == "1", DeadStatus: parseDead(f[4]),
		Session: in[:n[0]],
		Name:    in[n[0] : n[0]+n[1]],
		Repo:    in[n[0]+n[1] : total],
	}, in[total+1:], nil
}

// programArgs are the arguments new-window and respawn-pane take for what a
// pane runs: its directory, its environment (in a stable order) and argv,
// each escaped for tmux.
func programArgs(dir string, argv []string, env map[string]string) []string {
	var args []string
	if dir != "" {
		args = append(args, "-c", literal(dir))
	}
	for _, k := range slices.Sorted(maps.Keys(env)) {
		args = append(args, "-e", arg(k+"="+env[k]))
	}
	if len(argv) > 0 {
		args = append(args, "--")
		for _, a := range argv {
			args = append(args, arg(a))
		}
	}
	return args
}

// Respawn runs argv again in a pane whose process has exited, in dir with
// env: the same pane, the same window. Without -k tmux refuses a pane whose
// process still runs, so a live agent is never replaced.
func (s Server) Respawn(ctx context.Context, paneID, dir string, argv []string, env map[string]string) error {
	// The last run's exit status must not outlive it: unset in the same
	// call, before the new process can set its own.
	args := append([]string{"set-option", "-p", "-u", "-t", paneID, ExitOption, ";", "respawn-pane", "-t", paneID}, programArgs(dir, argv, env)...)
	if _, err := s.Run(ctx, nil, args...); err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "restart the program of pane %s", paneID)
	}
	return nil
}

// NewWindow opens a detached window named name at the end of session, in
// directory dir (tmux's default when empty), running argv with env added to its
// environment. Following tmux, an empty argv runs the default shell, a single
// element is a shell command line, and two or more are executed directly.
//
// The window is marked with RepoOption=repo and gets allow-rename off,
// automatic-rename off (a title escape from the program cannot rename it) and
// remain-on-exit on (a program that exits leaves a dead pane instead of no
// window).
func (s Server) NewWindow(ctx context.Context, session, name, repo, dir string, argv []string, env map[string]string) (Window, error) {
	if dir != "" {
		if fi, err := os.Stat(dir); err != nil || !fi.IsDir() {
			return Window{}, errs.New(errs.NotFound, "tmux %s: directory %q for window %q is not a directory", s, dir, name)
		}
	}
	// One command list, because tmux handles no pane output or process exit
	// between its commands: the options are in place before the program can
	// print a title or exit. "-a" after {end} makes the new window the one
	// {end} names next.
	target := "=" + session + ":{end}"
	args := []string{"new-window", "-d", "-a", "-t", target, "-n", literal(name),
		"-P", "-F", "#{window_id}\x1f#{pane_id}\x1f#{pane_pid}"}
	args = append(args, programArgs(dir, argv, env)...)
	opts := [][2]string{{"allow-rename", "off"}, {"automatic-rename", "off"}, {"remain-on-exit", "on"}}
	if repo != "" {
		opts = append(opts, [2]string{RepoOption, repo})
	}
	for _, o := range opts {
		args = append(args, ";", "set-option", "-w", "-t", target, o[0], arg(o[1]))
	}
	out, err := s.Run(ctx, nil, args...)
	if err != nil {
		return Window{}, errs.Wrap(errs.CodeOf(err), err, "open window %q in session %q", name, session)
	}
	f := strings.Split(strings.TrimSuffix(out, "\n"), "\x1f")
	if len(f) != 3 {
		return Window{}, errs.New(errs.Internal, "tmux %s new-window: unexpected output %q", s, out)
	}
	pid, err := strconv.Atoi(f[2])
	if err != nil {
		return Window{}, errs.New(errs.Internal, "tmux %s new-window: bad pane pid %q", s, f[2])
	}
	return Window{ID: f[0], Name: name, Session: session, PaneID: f[1], PanePID: pid, DeadStatus: -1, Repo: repo}, nil
}
