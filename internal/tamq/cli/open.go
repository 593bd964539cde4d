package cli

import (
	"context"
	"fmt"
	"os"
	"slices"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/workspace"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// openOptions are the flags of open and of the root form.
type openOptions struct {
	command    string
	mode       string
	noService  bool
	tmuxSocket string
}

func (o *openOptions) register(cmd *cobra.Command) {
	fs := cmd.Flags()
	fs.StringVar(&o.command, "command", "", "run this command in each window (default: your shell)")
	fs.StringVar(&o.mode, "mode", string(queue.Manual), "trigger (coordination-engine may wake the agent; needs --command: the agent itself, not a shell nor a wrapper such as script, ssh or sudo -s) or manual")
	fs.BoolVar(&o.noService, "no-service", false, "open the windows without messaging (no service, no delivery)")
	fs.StringVar(&o.tmuxSocket, "tmux-socket", "", "tmux server: a socket name as tmux -L, or a socket path as tmux -S (default: the server tmux would use)")
	cmd.RegisterFlagCompletionFunc("mode", cobra.FixedCompletions(queue.Names(queue.WindowModes), cobra.ShellCompDirectiveNoFileComp))
}

type openRecord struct {
	EndpointID string               `json:"endpoint_id"`
	TmuxSocket string               `json:"tmux_socket"`
	Service    bool                 `json:"service"`
	Windows    []api.EndpointWindow `json:"windows"`
}

func newOpenCmd(a *app.App) *cobra.Command {
	var o openOptions
	cmd := &cobra.Command{
		Use:   "open [--command CMD] [--mode trigger|manual] REPO...",
		Short: "Open one tmux window per repo, and the service when it is not running",
		Long: `Open one tmux window per gita-registered repo, named after it and started in its
path, running --command or your shell. A repo that already has its window is not
opened twice; one whose window's agent has exited runs the command again in that
window. A --command the shell cannot find (127) or run (126) within a second
closes its window and fails: "command not found: CMD" (exit 12), or "command
cannot be run" (exit 9). The service is started (detached) when it is not
running; if it cannot start, nothing is opened. --no-service opens the windows
without messaging. The windows go to tmux session tamq, and open says how to see
them (unless --quiet): tmux attach -t tamq outside tmux, tmux switch-client -t
tamq inside.

The root form 'tamq --command codex --mode trigger REPO...' means the same; a
command name wins over a repo of the same name.`,
		Example: `  tamq open webapp api
  tamq open --command claude --mode trigger webapp
  tamq --command codex --mode trigger webapp api`,
		Args:              cobra.MinimumNArgs(1),
		ValidArgsFunction: app.CompleteRepos(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runOpen(cmd, a, o, args)
		},
	}
	o.register(cmd)
	return cmd
}

func runOpen(cmd *cobra.Command, a *app.App, o openOptions, slugs []string) (err error) {
	if !slices.Contains(queue.WindowModes, queue.WindowMode(o.mode)) {
		return app.UsageError("--mode must be trigger or manual, not %q", o.mode)
	}
	reg, err := a.Registry()
	if err != nil {
		return err
	}
	repos, err := resolveAll(reg, slugs)
	if err != nil {
		return err
	}
	if err := checkTriggerCommand(cmd.Context(), a, o, repos); err != nil {
		return err
	}
	p, err := a.Paths()
	if err != nil {
		return err
	}
	brk, err := brokerForWindows(cmd.Context(), a, o, p, reg)
	if err != nil {
		return err
	}
	var want []workspace.Repo
	for _, r := range repos {
		want = append(want, workspace.Repo{Repo: r, Command: o.command, Mode: o.mode, KeepMode: !cmd.Flags().Changed("mode")})
	}
	ctx := cmd.Context()
	engine, err := paths.Resolve(paths.Engine, a.Getenv)
	if err != nil {
		return err
	}
	wo := workspace.Options{TamqSocket: p.Socket, EngineSocket: engine.Socket, LockFile: p.OpenLockFile, Broker: brk, Note: a.Notef}
	service := client.New(p)
	if !o.noService {
		// The service learns the tmux server before any window's agent starts,
		// so what an agent says at once is known to come from its window.
		wo.Announce = func(ep api.Endpoint) error { return service.Register(ctx, ep) }
	}
	res, err := workspace.Open(ctx, tmux.Choose(o.tmuxSocket, a.Getenv), want, wo)
	if err != nil {
		return err
	}
	// A command that cannot start (not installed, not executable) is said
	// now, not left as a dead window that reads as opened.
	srv := tmux.Server{Socket: res.Endpoint.TmuxSocket}
	failed, err := workspace.StartFailures(ctx, srv, res.Endpoint.Windows, clock.System, workspace.StartWatch)
	if err != nil {
		return err
	}
	res.Endpoint.Windows, err = closeFailed(ctx, srv, res.Endpoint.Windows, failed)
	if err != nil {
		return err
	}
	rec := openRecord{EndpointID: res.Endpoint.ID, TmuxSocket: res.Endpoint.TmuxSocket, Service: !o.noService, Windows: res.Endpoint.Windows}
	if !o.noService && len(res.Endpoint.Windows) > 0 {
		if err := service.Register(ctx, res.Endpoint); err != nil {
			return err
		}
	}
	if len(failed) > 0 {
		// The windows that started are registered; the command's failure is
		// the exit status.
		defer func() { err = startError(failed[0]) }()
	}
	if len(rec.Windows) > 0 {
		if hint := whereWindows(ctx, a.Getenv, o.tmuxSocket, res.Endpoint.TmuxSocket); hint != "" {
			a.Notef("%s", hint)
		}
	}
	if a.JSON {
		return a.PrintJSON(rec)
	}
	printOpened(a, rec)
	return nil
}

func resolveAll(reg *gita.Registry, slugs []string) ([]gita.Repo, error) {
	var repos []gita.Repo
	for _, slug := range slugs {
		r, err := reg.Resolve(slug)
		if err != nil {
			return nil, err
		}
		repos = append(repos, r)
	}
	return repos, nil
}

// brokerForWindows starts tamq's service unless --no-service, and says how
// the windows start their brokers: none without the service, which would
// give them no messages.
func brokerForWindows(ctx context.Context, a *app.App, o openOptions, p paths.Paths, reg *gita.Registry) (workspace.Broker, error) {
	if o.noService {
		fmt.Fprintf(a.Err, "%s: WARNING: --no-service: these windows get no messages; use `tamq send` after `tamq start`\n", a.Name())
		return workspace.Broker{}, nil
	}
	if _, err := a.Config(); err != nil {
		return workspace.Broker{}, err
	}
	exe, err := os.Executable()
	if err != nil {
		return workspace.Broker{}, errs.Wrap(errs.Internal, err, "cannot find the tamq executable")
	}
	started, err := daemon.EnsureRunning(ctx, daemon.Options{Paths: p, Exe: exe, Args: []string{"serve"}})
	if err != nil {
		return workspace.Broker{}, err
	}
	if !started.AlreadyRunning {
		printHistoryAdvisory(ctx, a)
	}
	return workspace.Broker{Exe: exe, GitaDir: reg.Dir}, nil
}

// printOpened says, window by window, what the open did.
func printOpened(a *app.App, rec openRecord) {
	for _, w := range rec.Windows {
		verb := "opened"
		switch {
		case w.Reused:
			verb = "reusing the window of"
		case w.Restarted:
			verb = "started the command again in the window of"
		}
		mode := w.Mode + " mode"
		if w.Mode == "" {
			mode = "mode unchanged"
		}
		esc := textsafe.Escape
		a.Printf("%s %s: window %s, pane %s (%s) on %s\n", verb, esc(w.Repo), esc(w.WindowID), esc(w.PaneID), esc(mode), esc(rec.EndpointID))
	}
}

// whereWindows says how to see the windows an open put in session tamq,
// which nothing shows by itself (issue 40): from outside tmux, the attach
// command for the server they are on; from inside tmux, switch-client when
// that is the same server and the caller is in another session; a server
// other than the caller's can only be attached from outside tmux. "" when
// the caller already is in session tamq.
func whereWindows(ctx context.Context, getenv func(string) string, tmuxSocket, socket string) string {
	server := "tmux "
	switch {
	case strings.Contains(tmuxSocket, "/"):
		server += "-S " + shellWord(tmuxSocket) + " "
	case tmuxSocket != "":
		server += "-L " + shellWord(tmuxSocket) + " "
	}
	attach := server + "attach -t " + workspace.SessionName
	inside := getenv("TMUX")
	if inside == "" {
		return fmt.Sprintf("the windows are in tmux session %s; to see them: %s", workspace.SessionName, attach)
	}
	// $TMUX is "socket,server pid,session id" of the client's session.
	fields := strings.Split(inside, ",")
	if fields[0] != socket {
		if server == "tmux " {
			server += "-S " + shellWord(socket) + " "
		}
		return fmt.Sprintf("the windows are in session %s of another tmux server than yours; to see them, from a terminal outside tmux: %sattach -t %s", workspace.SessionName, server, workspace.SessionName)
	}
	id, err := tmux.Server{Socket: socket}.Run(ctx, nil, "display-message", "-p", "-t", "="+workspace.SessionName+":", "#{session_id}")
	if err == nil && len(fields) == 3 && strings.TrimSpace(id) == "$"+fields[2] {
		return ""
	}
	return fmt.Sprintf("the windows are in tmux session %s; to switch to it: tmux switch-client -t %s", workspace.SessionName, workspace.SessionName)
}

// shellWord quotes s for a shell when it holds anything but the characters
// of plain names and paths, so that a printed command runs as written.
func shellWord(s string) string {
	for _, r := range s {
		if !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || strings.ContainsRune("-_./+:@%=", r)) {
			return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
		}
	}
	return s
}

// closeFailed closes the windows whose command did not start (nothing in
// them can take a message, and a restart must not run it again), and
// returns the others.
func closeFailed(ctx context.Context, srv tmux.Server, ws []api.EndpointWindow, failed []workspace.StartFailure) ([]api.EndpointWindow, error) {
	if len(failed) == 0 {
		return ws, nil
	}
	gone := map[string]bool{}
	for _, f := range failed {
		if _, err := srv.Run(ctx, nil, "kill-window", "-t", f.Window.WindowID); err != nil {
			return ws, err
		}
		gone[f.Window.WindowID] = true
	}
	var kept []api.EndpointWindow
	for _, w := range ws {
		if !gone[w.WindowID] {
			kept = append(kept, w)
		}
	}
	return kept, nil
}

// startError is the error of a window whose command did not start, in the
// shell's words: 127 is a command not found (exit 12, not_found), 126 one
// found but not executable (exit 9, permission_denied).
func startError(f workspace.StartFailure) error {
	cmd, repo := textsafe.Escape(f.Window.Command), textsafe.Escape(f.Window.Repo)
	if f.Status == 127 {
		return errs.New(errs.NotFound, "command not found: %s (the window of %s exited 127 and is closed)", cmd, repo).
			WithHint("install it, or give its full path: `tamq open --command /path/to/%s %s`", cmd, repo)
	}
	return errs.New(errs.PermissionDeny, "command cannot be run: %s (found but not executable: the window of %s exited 126 and is closed)", cmd, repo).
		WithHint("make it executable (`chmod +x`), or give the right path with --command")
}

// checkTriggerCommand refuses trigger mode for a window that would run a
// shell (no --command, or a shell as the command), or whose command runs
// under a wrapper (script, ssh, sudo, docker run, screen, …) anything but a
// known agent named on the line (program.CheckTrigger), before anything
// starts: coordination-engine's wakes would be typed into the shell and run
// as commands, and behind a wrapper tamq's foreground check sees only the
// wrapper. A repo whose window is open already keeps its command; the
// service checks that one when the window is registered.
func checkTriggerCommand(ctx context.Context, a *app.App, o openOptions, repos []gita.Repo) error {
	if o.mode != string(queue.Trigger) {
		return nil
	}
	if o.command != "" {
		// The configured agent names count as agents under a wrapper too.
		// A config that does not load leaves them out, which only refuses
		// more; the service's start reports that config's error.
		var extra []string
		if cfg, err := a.Config(); err == nil {
			extra = cfg.Delivery.AgentPrograms
		}
		return triggerRefusal(o.command, program.CheckTrigger(o.command, extra))
	}
	// Without --command a new window runs your shell; an open one is reused.
	open := map[string]bool{}
	if wins, err := tmux.Choose(o.tmuxSocket, a.Getenv).ListWindows(ctx); err == nil {
		for _, w := range wins {
			if !w.Dead && w.Repo != "" {
				open[w.Repo] = true
			}
		}
	}
	for _, r := range repos {
		if !open[r.Name] {
			return app.UsageError("--mode trigger needs --command for %s: without it the new window runs your shell, and coordination-engine's prompts would run in it as commands; give the agent's command, e.g. --command claude", textsafe.Escape(r.Name))
		}
	}
	return nil
}

// triggerRefusal is the usage error (exit 2) for a command CheckTrigger
// refused, or nil. Each says to run the agent itself.
func triggerRefusal(command string, c program.TriggerCheck) error {
	cmd := textsafe.Escape(command)
	switch {
	case !c.Refused:
		return nil
	case c.Via == "":
		return app.UsageError("--mode trigger with --command %q: that runs a shell, and coordination-engine's prompts would run in it as commands; give the agent's command, e.g. --command claude", cmd)
	case !c.Wrapper:
		return app.UsageError("--mode trigger with --command %q: tamq cannot tell what %s runs (%s), and a shell would run coordination-engine's prompts as commands; run the agent itself: --command claude", cmd, c.Via, c.Why)
	}
	return app.UsageError("--mode trigger with --command %q: %s runs its program out of tamq's sight (the window's foreground is %s, whatever runs behind it), and %s, so coordination-engine's prompts could reach a shell and run as commands; run the agent itself: --command claude", cmd, c.Via, c.Via, c.Why)
}
