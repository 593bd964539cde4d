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
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
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

// checkPane refuses anything but a pane id: tmux parses other targets and may
// resolve a bad one to some other pane.
func checkPane(paneID string) error {
	if !isID(paneID, "%") {
		return errs.New(errs.Internal, "tmux: %q is not a pane id (%%N)", paneID)
	}
	return nil
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
