// Package workspace opens the tmux windows of repos: one window per repo per
// tmux server, reused when it exists, never doubled. Both `tamq open` and the
// service's restore at `tamq start` use it.
package workspace

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// SessionName is the tmux session tamq opens its windows in.
const SessionName = "tamq"

// Repo is a repo to open, with how its window runs.
type Repo struct {
	gita.Repo
	Command string // "" runs the user's shell
	Mode    string // trigger | manual
	// KeepMode leaves a reused window's recorded mode as it is.
	KeepMode bool
}

// Result is the endpoint the windows are on, with the windows.
type Result struct {
	Endpoint api.Endpoint
}

// Broker says how windows run under `tamq broker`, which routes the To:
// lines of agent and operator. The zero Broker opens plain windows
// (--no-service).
type Broker struct {
	Exe     string // the tamq executable
	GitaDir string // the registry the broker checks addresses against
}

// Options say how Open opens windows.
type Options struct {
	// TamqSocket is given to the windows' processes as TAMQ_SOCKET (the tmux
	// server's environment may name other directories than ours).
	TamqSocket string
	// EngineSocket is given to them as COORDINATION_ENGINE_SOCKET, so an
	// agent's `coordination-engine lease ...` commands reach the engine.
	EngineSocket string
	// LockFile serializes opens: finding a repo's window and creating it when
	// missing is one step for concurrent opens, so they leave one window.
	LockFile string
	Broker   Broker
	// Announce, when set, is told the endpoint (with no windows yet) once the
	// tmux server is known and before any window's program starts, so the
	// service knows the server before anything in it speaks.
	Announce func(api.Endpoint) error
	// Note reports reconciled duplicates.
	Note func(format string, args ...any)
	// LeaveEnded leaves a repo whose window's agent has exited as it is:
	// no new window, nothing run again (a restore: a person may have quit
	// it). Otherwise (an open) the command runs again in that window.
	LeaveEnded bool
}

// Open makes sure each repo has exactly one live window on srv.
func Open(ctx context.Context, srv tmux.Server, repos []Repo, o Options) (Result, error) {
	var res Result
	if len(repos) == 0 {
		return res, nil
	}
	if err := paths.EnsurePrivateDir(filepath.Dir(o.LockFile)); err != nil {
		return res, err
	}
	lock, err := lockfile.Acquire(ctx, o.LockFile)
	if err != nil {
		return res, err
	}
	defer lock.Release()
	created, err := srv.EnsureSession(ctx, SessionName, repos[0].Path)
	if err != nil {
		return res, err
	}
	pid, err := srv.PID(ctx)
	if err != nil {
		return res, err
	}
	socket, err := srv.SocketPath(ctx)
	if err != nil {
		return res, err
	}
	srv = tmux.Server{Socket: socket} // name the server exactly from here on
	endpointID := "tmux-amq-" + strconv.Itoa(pid)
	existing, err := srv.ListWindows(ctx)
	if err != nil {
		return res, err
	}
	res.Endpoint = api.Endpoint{ID: endpointID, TmuxSocket: socket, ServerPID: pid, Session: SessionName, State: string(queue.Connected)}
	if o.Announce != nil {
		if err := o.Announce(res.Endpoint); err != nil {
			return res, err
		}
	}
	for _, r := range repos {
		ew, ok, err := openOne(ctx, srv, existing, r, endpointID, o)
		if err != nil {
			return res, err
		}
		if ok {
			res.Endpoint.Windows = append(res.Endpoint.Windows, ew)
		}
	}
	if created {
		// tmux makes a session with a first window of its own, a plain shell
		// that attaching would land in; the repo windows replace it.
		for _, w := range existing {
			if w.Session == SessionName && w.Repo == "" {
				if _, err := srv.Run(ctx, nil, "kill-window", "-t", w.ID); err != nil {
					return res, err
				}
			}
		}
	}
	return res, nil
}

// openOne gives r its window among existing: the live one it has (reused),
// its dead one with the command run again, or a new one; any other window
// marked as r's is unmarked. ok is false for a repo whose agent ended when
// o.LeaveEnded keeps it so.
func openOne(ctx context.Context, srv tmux.Server, existing []tmux.Window, r Repo, endpointID string, o Options) (api.EndpointWindow, bool, error) {
	w, reused, dups := find(existing, r.Name, runsBroker)
	// A repo whose only windows are dead: its agent exited. An open runs
	// the command again in the first of them, so that no second window
	// appears and no dead one is left behind; a restore leaves it ended.
	var revive *tmux.Window
	if !reused && len(dups) > 0 {
		if o.LeaveEnded {
			return api.EndpointWindow{}, false, nil
		}
		revive, dups = &dups[0], dups[1:]
	}
	keeper := w.ID
	if revive != nil {
		keeper = revive.ID
	}
	for _, d := range dups {
		// Reconciled, never doubled: the extra window is left to the user but
		// no longer marked as the repo's.
		if _, err := srv.Run(ctx, nil, "set-option", "-w", "-u", "-t", d.ID, tmux.RepoOption); err != nil {
			return api.EndpointWindow{}, false, err
		}
		switch {
		case d.Dead:
			o.Note("window %s of %s: its agent had exited; window %s takes its place for messages", d.ID, r.Name, keeper)
		case reused:
			o.Note("window %s was a second window for %s; it is no longer used for messages (window %s keeps them)", d.ID, r.Name, keeper)
		default:
			o.Note("window %s was a second window for %s; it is no longer used for messages", d.ID, r.Name)
		}
	}
	var err error
	switch {
	case reused:
	case revive != nil:
		if w, err = respawn(ctx, srv, *revive, r, endpointID, o); err != nil {
			return api.EndpointWindow{}, false, err
		}
	default:
		if w, err = srv.NewWindow(ctx, SessionName, r.Name, r.Name, r.Path, WindowArgv(r, o.Broker), WindowEnv(r.Name, endpointID, o)); err != nil {
			return api.EndpointWindow{}, false, err
		}
	}
	ew := api.EndpointWindow{Repo: r.Name, RepoPath: r.Path, WindowID: w.ID, PaneID: w.PaneID, Mode: r.Mode, Command: r.Command,
		Alive: !w.Dead, Reused: reused, Restarted: revive != nil, PanePID: w.PanePID}
	if reused {
		ew.Command = "" // what runs there is whatever was started; the record keeps it
		if r.KeepMode {
			ew.Mode = ""
		}
	}
	return ew, true, nil
}

// respawn runs r's command again in dead, a window of r whose program has
// exited: the same window and pane, with the environment and directory a
// new window gets. It returns the window with its new pane process.
func respawn(ctx context.Context, srv tmux.Server, dead tmux.Window, r Repo, endpointID string, o Options) (tmux.Window, error) {
	argv := WindowArgv(r, o.Broker)
	if argv == nil {
		// respawn-pane without a command would run the pane's old one again.
		argv = []string{userShell()}
	}
	if err := srv.Respawn(ctx, dead.PaneID, r.Path, argv, WindowEnv(r.Name, endpointID, o)); err != nil {
		return dead, err
	}
	out, err := srv.Run(ctx, nil, "display-message", "-p", "-t", dead.PaneID, "#{pane_pid}")
	if err != nil {
		return dead, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return dead, errs.New(errs.Internal, "tmux %s: bad pane pid %q", srv, out)
	}
	dead.PanePID, dead.Dead, dead.DeadStatus = pid, false, -1
	return dead, nil
}

// userShell is the user's login shell, as a new window runs it.
func userShell() string {
	if shell := os.Getenv("SHELL"); shell != "" {
		return shell
	}
	return "/bin/sh"
}

// WindowEnv is the environment a repo's window gets: which repo and
// endpoint it is, and where tamq's and the engine's sockets are.
func WindowEnv(repo, endpointID string, o Options) map[string]string {
	env := map[string]string{"TAMQ_REPO": repo, "TAMQ_ENDPOINT": endpointID, "TAMQ_SOCKET": o.TamqSocket}
	if o.EngineSocket != "" {
		env["COORDINATION_ENGINE_SOCKET"] = o.EngineSocket
	}
	return env
}

// WindowArgv is what a repo's window runs: the command (through the shell)
// or the user's shell, under the broker when there is one.
func WindowArgv(r Repo, broker Broker) []string {
	if broker.Exe == "" {
		if r.Command == "" {
			return nil // tmux's default shell
		}
		return []string{r.Command}
	}
	argv := []string{broker.Exe, "broker", "--repo", r.Name, "--gita-dir", broker.GitaDir, "--"}
	if r.Command != "" {
		return append(argv, "/bin/sh", "-c", r.Command)
	}
	return append(argv, userShell())
}

// find returns the live window tamq opened for repo, and the other windows
// marked for it: further live ones, and dead ones (whose agent exited) when a
// new window replaces them, so a dead pane that is respawned later never
// makes a second window for the repo. Of several live ones it keeps the
// first whose pane runs tamq's broker for repo (brokered): a window the user
// marked by hand (set-option @tamq_repo) runs no broker, and keeping it
// would cut the agent's window off from messages. Without one, the first.
func find(ws []tmux.Window, repo string, brokered func(w tmux.Window, repo string) bool) (found tmux.Window, ok bool, dups []tmux.Window) {
	var live, dead []tmux.Window
	for _, w := range ws {
		switch {
		case w.Repo != repo:
		case w.Dead:
			dead = append(dead, w)
		default:
			live = append(live, w)
		}
	}
	if len(live) == 0 {
		return found, false, dead
	}
	keep := 0
	if len(live) > 1 {
		for i, w := range live {
			if brokered(w, repo) {
				keep = i
				break
			}
		}
	}
	for i, w := range live {
		if i != keep {
			dups = append(dups, w)
		}
	}
	return live[keep], true, append(dups, dead...)
}

// runsBroker says whether w's pane runs `tamq broker --repo repo`: the
// pane's process is the broker itself (tmux starts an argv of several words
// without a shell). Read from /proc, whose command line is exact, where tmux's
// pane_start_command quotes it.
func runsBroker(w tmux.Window, repo string) bool {
	if w.PanePID <= 0 {
		return false
	}
	b, err := os.ReadFile("/proc/" + strconv.Itoa(w.PanePID) + "/cmdline")
	if err != nil {
		return false
	}
	return isBroker(strings.Split(strings.TrimSuffix(string(b), "\x00"), "\x00"), repo)
}

// isBroker says whether argv is tamq's broker for repo (as WindowArgv
// makes it); what follows its "--" is the agent's command, not read.
func isBroker(argv []string, repo string) bool {
	if len(argv) < 2 || argv[1] != "broker" {
		return false
	}
	if name := filepath.Base(argv[0]); name != "tamq" {
		return false
	}
	for i, a := range argv[2:] {
		switch {
		case a == "--":
			return false
		case a == "--repo":
			return i+3 < len(argv) && argv[i+3] == repo
		case strings.HasPrefix(a, "--repo="):
			return a == "--repo="+repo
		}
	}
	return false
}
