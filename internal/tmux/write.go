package tmux

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

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

// guardedWrite is the machinery under Paste and SendEnter: the guarded
// command list, the explanation of a refusal and the clean-up of a buffer
// left behind. Server keeps only the writes callers make.
type guardedWrite struct{ Server }

// guardedPaste runs, in one tmux command list: load (which fills buffer buf),
// then the guard's check, then paste, so nothing runs in the server between
// the check and the paste (tmux handles no process exit between the commands
// of one list once the buffer is loaded). When the guard does not hold, the
// buffer is dropped and the refusal explained.
func (s guardedWrite) guardedPaste(ctx context.Context, g Guard, stdin io.Reader, buf string, load []string, paste string, what string) error {
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
func (s guardedWrite) explain(ctx context.Context, g Guard) *Refusal {
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
	return guardedWrite{s}.guardedPaste(ctx, g, strings.NewReader(text), buf, []string{"load-buffer", "-b", buf, "-"},
		"paste-buffer -p -r -d -b "+buf+" -t "+g.PaneID, "paste into")
}

// SendEnter writes one carriage return into the pane as its own write, under
// the same guard as Paste. It is pasted rather than sent with send-keys (which
// yields the same 0x0d) because send-keys goes to copy mode while the pane is
// in it, and the CR would be lost; a paste always reaches the program.
func (s Server) SendEnter(ctx context.Context, g Guard) error {
	buf := bufferName()
	return guardedWrite{s}.guardedPaste(ctx, g, nil, buf, []string{"set-buffer", "-b", buf, "\r"},
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
func (s guardedWrite) dropBuffer(ctx context.Context, buf string) {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	s.Run(ctx, nil, "delete-buffer", "-b", buf)
}

// bufferName is unique across processes: buffer names are server-wide. It is
// also safe in a tmux command string (letters and digits only).
func bufferName() string { return "tamq-" + rand.Text() }
