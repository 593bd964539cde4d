// Package tmux runs the tmux command for tamq: it picks the server, opens one
// window per repository and writes text into panes.
//
// Every call names its server explicitly (-S or -L), so nothing depends on
// which server $TMUX happens to point at when the call runs. Nothing here kills
// a server or changes a server-wide option: the only options we set are window
// options on windows we open, because the server may be the user's own.
package tmux

import (
	"bytes"
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// RepoOption is the window user option that marks a window as opened by tamq
// and names its repository.
const RepoOption = "@tamq_repo"

// ErrNotWritten marks a failed write that provably put nothing into the pane,
// so the caller may try again without risking a duplicate.
var ErrNotWritten = errors.New("nothing was written to the pane")

// errNotRun marks failures that tmux reported before running the command
// (no server, unknown target, no tmux binary): nothing happened.
var errNotRun = errors.New("tmux did not run the command")

// Server names a tmux server the way tmux chooses one.
type Server struct {
	Socket string // -S path; "" when Name is used
	Name   string // -L name
}

// Choose picks the server like tmux does: an explicit -L name (socketName, from
// --tmux-socket) wins; else the socket path in $TMUX; else the default server.
// The default server is named by its label ("default"), never by its path:
// tmux then checks that its socket directory (/tmp/tmux-<uid>) is the user's
// own and private before it connects or starts a server there, a check that
// naming the path with -S would skip. Callers read the path back with
// SocketPath once the server runs.
func Choose(socketName string, getenv func(string) string) Server {
	// A name with a slash is a socket path, as tmux's -S takes.
	if strings.Contains(socketName, "/") {
		return Server{Socket: socketName}
	}
	if socketName != "" {
		return Server{Name: socketName}
	}
	if path, _, _ := strings.Cut(getenv("TMUX"), ","); path != "" {
		return Server{Socket: path}
	}
	return Server{Name: "default"}
}

// labelDir is the directory where tmux keeps the sockets of -L labels.
func labelDir(getenv func(string) string) string {
	dir := getenv("TMUX_TMPDIR")
	if dir == "" {
		dir = "/tmp"
	}
	return filepath.Join(dir, fmt.Sprintf("tmux-%d", os.Getuid()))
}

// ChoosePath is the socket path of the server Choose picks, worked out as
// tmux does without asking it (the server may not run).
func ChoosePath(socketName string, getenv func(string) string) string {
	s := Choose(socketName, getenv)
	if s.Socket != "" {
		return s.Socket
	}
	return filepath.Join(labelDir(getenv), s.Name)
}

// ServerAt names the server whose socket is path, by its label when path is
// in tmux's label directory, so that tmux's own check of that directory runs
// before a server is started there (restoring windows may start one).
func ServerAt(path string, getenv func(string) string) Server {
	if filepath.Dir(path) == labelDir(getenv) {
		return Server{Name: filepath.Base(path)}
	}
	return Server{Socket: path}
}

// args mirrors tmux, where -S beats -L.
func (s Server) args() []string {
	switch {
	case s.Socket != "":
		return []string{"-S", s.Socket}
	case s.Name != "":
		return []string{"-L", s.Name}
	}
	return nil
}

func (s Server) String() string {
	if a := s.args(); a != nil {
		return strings.Join(a, " ")
	}
	return "(no server)"
}

// pipeWaitDelay is how long a finished or killed tmux client's pipes may stay
// open (held by the server it passed them to) before they are closed.
const pipeWaitDelay = time.Second

// Run runs one tmux command line (commands may be separated by ";" arguments)
// against s and returns its standard output. On failure the error carries
// tmux's own message and an errs code.
func (s Server) Run(ctx context.Context, stdin io.Reader, args ...string) (string, error) {
	server := s.args()
	if server == nil || len(args) == 0 {
		return "", errs.New(errs.Internal, "tmux: no server or no command given")
	}
	// -u: without a UTF-8 locale (a daemon's environment often has none) tmux
	// replaces control and non-ASCII characters in its output, which would
	// garble names and the list separators.
	cmd := exec.CommandContext(ctx, "tmux", append(append([]string{"-u"}, server...), args...)...)
	cmd.Stdin = stdin
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	// The tmux client hands its stdio to the server, so a hung server holds
	// our pipes open after the client is killed: without a wait delay, a
	// deadline would never end the call.
	cmd.WaitDelay = pipeWaitDelay
	err := cmd.Run()
	if err == nil || (errors.Is(err, exec.ErrWaitDelay) && ctx.Err() == nil) {
		// The client succeeded and its output is complete; only the server
		// was slow to let go of the pipes.
		return stdout.String(), nil
	}
	what := fmt.Sprintf("tmux %s %s", s, args[0])
	if errors.Is(err, exec.ErrNotFound) {
		return "", (&errs.Error{Code: errs.Unavailable, Message: what + ": tmux is not installed (not found in PATH)", Err: errNotRun}).
			WithHint("install tmux 3.2 or newer")
	}
	if ctxErr := ctx.Err(); ctxErr != nil {
		code := errs.Internal
		if errors.Is(ctxErr, context.DeadlineExceeded) {
			code = errs.Timeout
		}
		return "", errs.Wrap(code, ctxErr, "%s", what)
	}
	msg := strings.TrimSpace(stderr.String())
	if msg == "" {
		msg = err.Error()
	}
	code, notRun := classify(msg)
	cause := errors.New(msg)
	if notRun {
		cause = errNotRun
	}
	return "", &errs.Error{Code: code, Message: what + ": " + msg, Err: cause}
}

// classify maps tmux's messages (it exits 1 for every failure) to codes, and
// tells whether tmux refused before the command could do anything.
func classify(msg string) (code errs.Code, notRun bool) {
	switch {
	case strings.Contains(msg, "no server running on"):
		return errs.Unavailable, true
	case strings.Contains(msg, "error connecting to"):
		if strings.Contains(msg, "Permission denied") {
			return errs.PermissionDeny, true
		}
		return errs.Unavailable, true
	case strings.Contains(msg, "has unsafe permissions"):
		// tmux's own check of its socket directory (another user's, or open
		// to others): its wording is kept, it says what to fix.
		return errs.PermissionDeny, true
	case strings.Contains(msg, "can't find "): // pane, window or session
		return errs.NotFound, true
	case strings.Contains(msg, "server exited"), strings.Contains(msg, "lost server"):
		return errs.Unavailable, false
	}
	return errs.Internal, false
}

// Alive reports whether a server answers on s. A server with no sessions
// normally exits, but display works on one that stays (exit-empty off).
func (s Server) Alive(ctx context.Context) bool {
	_, err := s.PID(ctx)
	return err == nil
}

// PID is the server's process id.
func (s Server) PID(ctx context.Context) (int, error) {
	out, err := s.Run(ctx, nil, "display-message", "-p", "#{pid}")
	if err != nil {
		return 0, err
	}
	pid, err := strconv.Atoi(strings.TrimSpace(out))
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "tmux %s: bad server pid %q", s, out)
	}
	return pid, nil
}

// SocketPath is the path of the socket the server listens on, as tmux resolved it.
func (s Server) SocketPath(ctx context.Context) (string, error) {
	out, err := s.Run(ctx, nil, "display-message", "-p", "#{socket_path}")
	return strings.TrimSuffix(out, "\n"), err
}

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
	Dead    bool   // pane_dead: the process exited (needs remain-on-exit on)
	Repo    string // the @tamq_repo option; "" for windows tamq did not open
}

// tmux prints names raw, control characters included, so no separator is safe
// in the free-text fields. The fixed fields come first with the byte lengths
// (#{n:...}) of the free-text ones, which follow unseparated.
const listFormat = "#{window_id}\x1f#{pane_id}\x1f#{pane_pid}\x1f#{pane_dead}\x1f" +
	"#{n:session_name}\x1f#{n:window_name}\x1f#{n:" + RepoOption + "}\x1f" +
	"#{session_name}#{window_name}#{" + RepoOption + "}"

// ListWindows lists every window of every session in one tmux call. A window
// linked into several sessions appears once per session.
func (s Server) ListWindows(ctx context.Context) ([]Window, error) {
	out, err := s.Run(ctx, nil, "list-windows", "-a", "-F", listFormat)
	if err != nil {
		return nil, err
	}
	ws, err := parseWindows(out)
	if err != nil {
		return nil, errs.Wrap(errs.Internal, err, "tmux %s list-windows: unexpected output", s)
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
	var f [7]string
	for i := range f {
		var ok bool
		if f[i], in, ok = strings.Cut(in, "\x1f"); !ok {
			return Window{}, "", errors.New("missing field")
		}
	}
	var n [3]int
	total := 0
	for i := range n {
		v, err := strconv.Atoi(f[4+i])
		// Each length is checked against what is left before it is added:
		// lengths near the int limit would overflow the sum to a small
		// number and slice out of range.
		if err != nil || v < 0 || v > len(in)-total {
			return Window{}, "", fmt.Errorf("bad length %q", f[4+i])
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
		ID: f[0], PaneID: f[1], PanePID: pid, Dead: f[3] == "1",
		Session: in[:n[0]],
		Name:    in[n[0] : n[0]+n[1]],
		Repo:    in[n[0]+n[1] : total],
	}, in[total+1:], nil
}

// Respawn runs argv again in a pane whose process has exited, in dir with
// env: the same pane, the same window. Without -k tmux refuses a pane whose
// process still runs, so a live agent is never replaced.
func (s Server) Respawn(ctx context.Context, paneID, dir string, argv []string, env map[string]string) error {
	args := []string{"respawn-pane", "-t", paneID}
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
	return Window{ID: f[0], Name: name, Session: session, PaneID: f[1], PanePID: pid, Repo: repo}, nil
}

// checkPane refuses anything but a pane id: tmux parses other targets and may
// resolve a bad one to some other pane.
func checkPane(paneID string) error {
	if !isID(paneID, "%") {
		return errs.New(errs.Internal, "tmux: %q is not a pane id (%%N)", paneID)
	}
	return nil
}

// Guard is what a write into a pane must still find at the moment it
// happens: the pane PaneID, its program alive, on the tmux server whose pid is
// ServerPID, in a window marked (RepoOption) for Repo. Pane ids are per server
// and a new server hands out the old numbers again, so the pane id alone could
// name another repo's agent; and tmux 3.3a crashes the whole server, every
// window with it, when something is pasted into a pane whose program has
// exited.
type Guard struct {
	PaneID    string
	ServerPID int
	Repo      string
}

func (g Guard) check() error {
	if err := checkPane(g.PaneID); err != nil {
		return err
	}
	if g.ServerPID <= 0 || g.Repo == "" {
		return errs.New(errs.Internal, "tmux: a write into %s needs the server pid and the repo it is for", g.PaneID)
	}
	return nil
}

// condition is the guard as a tmux format that expands to 1 only when every
// part holds, evaluated by the server itself right before the write.
func (g Guard) condition() string {
	// -t with a pane that does not exist is not an error for if-shell (nor for
	// display-message): the format is expanded without a pane, so the pane id
	// is compared too.
	return fmt.Sprintf("#{&&:#{==:#{pane_id},%s},#{&&:#{==:#{pid},%d},#{&&:#{!=:#{pane_dead},1},#{==:#{%s},%s}}}}",
		g.PaneID, g.ServerPID, RepoOption, formatLiteral(g.Repo))
}

// formatLiteral escapes text for use as a literal inside a tmux format
// comparison, where '#', ',' and '}' are syntax.
func formatLiteral(text string) string {
	return strings.NewReplacer("#", "##", ",", "#,", "}", "#}").Replace(text)
}

// refusedMark is what a guarded write prints when its guard did not hold.
const refusedMark = "tamq-write-refused"

// ErrRefused marks a write the guard stopped: nothing was written because the
// pane was not what the caller expected (see Refusal for why).
var ErrRefused = errors.New("the pane is not the one the write is for")

// Refusal says why a guarded write was refused.
type Refusal struct {
	// AgentExited: the window is there but its program has exited.
	AgentExited bool
	// Gone: the server has no such pane any more.
	Gone   bool
	Reason string
}

func (r *Refusal) Error() string { return r.Reason }

// guardedPaste runs, in one tmux command list: load (which fills buffer buf),
// then the guard's check, then paste, so nothing runs in the server between
// the check and the paste (tmux handles no process exit between the commands
// of one list once the buffer is loaded). When the guard does not hold, the
// buffer is dropped and the refusal explained.
func (s Server) guardedPaste(ctx context.Context, g Guard, stdin io.Reader, buf string, load []string, paste string, what string) error {
	if err := g.check(); err != nil {
		return err
	}
	args := append(load, ";", "if-shell", "-F", "-t", g.PaneID, g.condition(),
		paste, "delete-buffer -b "+buf+" ; display-message -p "+refusedMark)
	out, err := s.Run(ctx, stdin, args...)
	if err != nil {
		s.dropBuffer(ctx, buf)
		return pasteFailed(err, "%s pane %s", what, g.PaneID)
	}
	if strings.Contains(out, refusedMark) {
		r := s.explain(ctx, g)
		code := errs.Unavailable
		if r.Gone {
			code = errs.NotFound
		}
		return &errs.Error{Code: code, Message: fmt.Sprintf("%s pane %s: nothing written: %s", what, g.PaneID, r.Reason),
			Err: errors.Join(ErrNotWritten, ErrRefused, r)}
	}
	return nil
}

// explain finds out which part of a guard failed; it runs after the refusal,
// so it describes the pane as it is now.
func (s Server) explain(ctx context.Context, g Guard) *Refusal {
	out, err := s.Run(ctx, nil, "display-message", "-p", "-t", g.PaneID, "#{pane_id}\x1f#{pid}\x1f#{pane_dead}\x1f#{"+RepoOption+"}")
	if err != nil {
		return &Refusal{Reason: "the pane cannot be inspected: " + err.Error()}
	}
	f := strings.SplitN(strings.TrimSuffix(out, "\n"), "\x1f", 4)
	if len(f) != 4 {
		return &Refusal{Reason: fmt.Sprintf("unexpected answer from tmux %q", out)}
	}
	f = f[1:]
	switch {
	case !strings.HasPrefix(out, g.PaneID+"\x1f"):
		return &Refusal{Gone: true, Reason: "the pane no longer exists"}
	case f[0] != strconv.Itoa(g.ServerPID):
		return &Refusal{Reason: fmt.Sprintf("the pane belongs to another tmux server (pid %s, not %d)", f[0], g.ServerPID)}
	case f[2] != g.Repo:
		return &Refusal{Reason: fmt.Sprintf("the window is marked for %q, not %q", f[2], g.Repo)}
	case f[1] == "1":
		return &Refusal{AgentExited: true, Reason: "the agent in the window has exited"}
	}
	return &Refusal{Reason: "the pane changed while it was written to"}
}

// RefusalOf returns why a write was refused by its guard, or nil when err is
// not such a refusal.
func RefusalOf(err error) *Refusal {
	var r *Refusal
	if errors.As(err, &r) {
		return r
	}
	return nil
}

// Paste writes text into the pane as one paste, bracketed only if the program
// turned bracketed paste on, with LF kept as LF, if and only if the guard
// holds when the paste happens. tmux passes the bytes as they are, so the
// caller must keep control bytes (other than LF and tab) out: an ESC[201~ in
// text would end the paste early. Empty text writes nothing.
//
// The error wraps ErrNotWritten when nothing reached the pane (and ErrRefused
// with a *Refusal when the guard stopped it); any other error means the bytes
// may have arrived, and the caller must not blindly retry.
func (s Server) Paste(ctx context.Context, g Guard, text string) error {
	if err := g.check(); err != nil {
		return err
	}
	if text == "" {
		return nil
	}
	// The last line of defence: whatever was checked before, a paste never
	// carries a byte that could end the bracketed paste or press a key.
	if !textsafe.Inert(text) {
		return notWritten(errs.New(errs.BodyInvalid, "the text has a control character other than newline and tab"), "refusing to paste into %s", g.PaneID)
	}
	// One tmux process for every step: a delivery spawns as few processes as
	// it can. When the pane cannot be found or the server not reached, tmux
	// ran nothing (pasteFailed reports ErrNotWritten); other failures may have
	// happened after bytes arrived.
	buf := bufferName()
	return s.guardedPaste(ctx, g, strings.NewReader(text), buf, []string{"load-buffer", "-b", buf, "-"},
		"paste-buffer -p -r -d -b "+buf+" -t "+g.PaneID, "paste into")
}

// SendEnter writes one carriage return into the pane as its own write, under
// the same guard as Paste. It is pasted rather than sent with send-keys (which
// yields the same 0x0d) because send-keys goes to copy mode while the pane is
// in it, and the CR would be lost; a paste always reaches the program.
func (s Server) SendEnter(ctx context.Context, g Guard) error {
	buf := bufferName()
	return s.guardedPaste(ctx, g, nil, buf, []string{"set-buffer", "-b", buf, "\r"},
		"paste-buffer -d -b "+buf+" -t "+g.PaneID, "send Enter to")
}

func pasteFailed(err error, format string, args ...any) error {
	if errors.Is(err, errNotRun) {
		return notWritten(err, format, args...)
	}
	return errs.Wrap(errs.CodeOf(err), err, format+" (may be partly written)", args...)
}

func notWritten(err error, format string, args ...any) error {
	return &errs.Error{
		Code:    errs.CodeOf(err),
		Message: fmt.Sprintf(format, args...) + ": nothing written: " + err.Error(),
		Err:     errors.Join(ErrNotWritten, err),
	}
}

// dropBuffer deletes a buffer a failed call may have left behind. It runs
// even when ctx is done, since that is one way the buffer gets left.
func (s Server) dropBuffer(ctx context.Context, buf string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.Run(ctx, nil, "delete-buffer", "-b", buf)
}

// bufferName is unique across processes: buffer names are server-wide. It is
// also safe in a tmux command string (letters and digits only).
func bufferName() string { return "tamq-" + rand.Text() }

// Capture is what a pane shows: its rows, the cursor, the title and whether
// the alternate screen is up.
type Capture struct {
	Rows          []string
	Width         int
	CursorX       int
	CursorY       int
	CursorVisible bool
	AltScreen     bool
	Title         string
}

// captureFormat puts the free-text title last, after its byte length.
const captureFormat = "#{pane_id}\x1f#{cursor_x}\x1f#{cursor_y}\x1f#{cursor_flag}\x1f#{alternate_on}\x1f#{pane_width}\x1f#{n:pane_title}\x1f#{pane_title}"

// Capture reads what the pane shows, in one tmux call, to tell whether the
// program in it is at its input prompt before a write (for windows without
// a broker). It never reads what an agent wrote to route it.
func (s Server) Capture(ctx context.Context, paneID string) (Capture, error) {
	if err := checkPane(paneID); err != nil {
		return Capture{}, err
	}
	out, err := s.Run(ctx, nil, "display-message", "-p", "-t", paneID, captureFormat, ";", "capture-pane", "-p", "-t", paneID)
	if err != nil {
		return Capture{}, err
	}
	c, ok := parseCapture(paneID, out)
	if !ok {
		return Capture{}, errs.New(errs.Internal, "tmux %s: unexpected capture of %s", s, paneID)
	}
	return c, nil
}

// parseCapture reads the output of Capture's tmux call: the fields of
// captureFormat, then the rows; ok is false when it is not that.
func parseCapture(paneID, out string) (Capture, bool) {
	f := strings.SplitN(out, "\x1f", 8)
	if len(f) != 8 || f[0] != paneID {
		return Capture{}, false
	}
	var n [6]int
	for i := range n {
		var err error
		if n[i], err = strconv.Atoi(f[i+1]); err != nil {
			return Capture{}, false
		}
	}
	titleLen, rest := n[5], f[7]
	// A negative length would index before the title.
	if titleLen < 0 || len(rest) <= titleLen || rest[titleLen] != '\n' {
		return Capture{}, false
	}
	c := Capture{CursorX: n[0], CursorY: n[1], CursorVisible: n[2] == 1, AltScreen: n[3] == 1, Width: n[4], Title: rest[:titleLen]}
	for _, row := range strings.Split(strings.TrimSuffix(rest[titleLen+1:], "\n"), "\n") {
		c.Rows = append(c.Rows, strings.TrimRight(row, " "))
	}
	return c, true
}

// CapturePane returns the pane's visible text, for tests and diagnostics; it
// is never used to read what an agent wrote.
func (s Server) CapturePane(ctx context.Context, paneID string) (string, error) {
	if err := checkPane(paneID); err != nil {
		return "", err
	}
	return s.Run(ctx, nil, "capture-pane", "-p", "-J", "-t", paneID)
}

// isID reports whether s is one of tmux's ids: prefix ("@" for a window,
// "%" for a pane) and digits.
func isID(s, prefix string) bool {
	digits, ok := strings.CutPrefix(s, prefix)
	return ok && digits != "" && strings.Trim(digits, "0123456789") == ""
}

// arg protects an argument from tmux's command-line parsing, which takes a
// trailing ";" as a command separator; "\;" at the end stands for ";".
func arg(a string) string {
	if strings.HasSuffix(a, ";") {
		return a[:len(a)-1] + `\;`
	}
	return a
}

// literal protects an argument that tmux also expands as a format (new-window
// -n and -c, new-session -s and -c), where "##" stands for "#".
func literal(a string) string { return arg(strings.ReplaceAll(a, "#", "##")) }
