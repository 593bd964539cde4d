// Package broker is tamq's PTY broker: it runs an agent under a new
// pseudo-terminal and relays bytes between the real terminal and the agent
// unchanged, so the window feels exactly like running the agent directly.
// (Observing To: lines and delivering through the PTY build on this relay.)
package broker

import (
	"errors"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/creack/pty"
	"golang.org/x/sys/unix"
	"golang.org/x/term"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Relay runs one child under a PTY.
type Relay struct {
	// Argv is the child's command line; Env its environment (nil: ours).
	Argv []string
	Env  []string
	Dir  string
	// In and Out are the outer terminal. When In is a terminal it is put in raw
	// mode for the child's lifetime and its size is passed on.
	In  *os.File
	Out io.Writer
	// FilterInput, when set, sees the operator's bytes first and returns what
	// passes to the child. Observe, when set, sees the child's output after
	// the operator's terminal has it; it must not block (Model copies and
	// returns).
	FilterInput func(p []byte) []byte
	Observe     io.Writer
	// Resized, when set, learns the child's terminal size at start and after
	// every resize.
	Resized func(cols, rows int)
	// AnswerStatusProbe answers the child's Program Status Protocol probe
	// (see statusProbe), so that it reports its state.
	AnswerStatusProbe bool
	probe             probeScanner

	lastOutput atomic.Int64  // when the child last wrote (Unix nanoseconds)
	childPID   atomic.Int64  // the child's pid while it runs, else 0 (then it may name another process)
	inRead     atomic.Bool   // the output relay waits in Read (it is not relaying a chunk)
	output     atomic.Uint64 // bytes the child wrote so far

	mu    sync.Mutex // one writer into the child's input at a time
	ptmx  *os.File
	proc  *os.Process
	outMu sync.Mutex // one writer onto the operator's terminal at a time
}

// Notice writes a line of tamq's own onto the operator's terminal, between
// the child's writes (never into the child's input).
func (r *Relay) Notice(msg string) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	io.WriteString(r.Out, "\r\n"+msg+"\r\n")
}

// EchoLocal writes bytes onto the operator's terminal only.
func (r *Relay) EchoLocal(p []byte) {
	r.outMu.Lock()
	defer r.outMu.Unlock()
	r.Out.Write(p)
}

// relayOutput copies the child's output to the operator's terminal and the
// observer.
func (r *Relay) relayOutput(ptmx io.Reader) error {
	buf := make([]byte, 32*1024)
	for {
		r.inRead.Store(true)
		n, err := ptmx.Read(buf)
		r.inRead.Store(false)
		if n > 0 {
			r.lastOutput.Store(time.Now().UnixNano())
			r.output.Add(uint64(n))
			if r.AnswerStatusProbe {
				for _, answer := range r.probe.answers(buf[:n]) {
					r.answerChild(answer)
				}
			}
			r.outMu.Lock()
			_, werr := r.Out.Write(buf[:n])
			r.outMu.Unlock()
			if werr != nil {
				return werr
			}
			if r.Observe != nil {
				r.Observe.Write(buf[:n])
			}
		}
		if err != nil {
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
	}
}

// answerChild writes an answer to the child's query into its input at
// once, ahead of the terminal's own answers to what follows the query. A
// delivery holding the input lock is not waited for (the output must flow):
// the answer then follows the delivery.
func (r *Relay) answerChild(answer []byte) {
	if r.mu.TryLock() {
		if r.ptmx != nil {
			r.ptmx.Write(answer)
		}
		r.mu.Unlock()
		return
	}
	go r.WriteInput(answer)
}

// drainAfterExit bounds how long the output may stay silent after the child
// exited before the broker stops relaying it: what the child wrote last is
// read in far less. The bound counts silence, not time since the exit: on a
// loaded machine, relaying what was written last can take longer than that.
const drainAfterExit = time.Second

// Run starts the child and relays until it exits; it returns the child's exit
// status as a shell reports it (128+n for a signal).
func (r *Relay) Run() (int, error) {
	if len(r.Argv) == 0 {
		return 0, errs.New(errs.Usage, "no command to run under the broker")
	}
	cmd := exec.Command(r.Argv[0], r.Argv[1:]...)
	cmd.Env, cmd.Dir = r.Env, r.Dir
	isTerm := r.In != nil && term.IsTerminal(int(r.In.Fd()))
	var size *pty.Winsize
	if isTerm {
		size, _ = pty.GetsizeFull(r.In)
	}
	ptmx, err := pty.StartWithSize(cmd, size) // sets Setsid and Setctty
	if err != nil {
		return 0, errs.Wrap(errs.Internal, err, "cannot start %s", r.Argv[0])
	}
	r.mu.Lock()
	r.ptmx, r.proc = ptmx, cmd.Process
	r.mu.Unlock()
	r.childPID.Store(int64(cmd.Process.Pid))
	if size != nil && r.Resized != nil {
		r.Resized(int(size.Cols), int(size.Rows))
	}
	// Closed under the lock, so the input pump and the resizer never use a
	// closed descriptor.
	defer func() {
		r.mu.Lock()
		r.ptmx = nil
		r.mu.Unlock()
		ptmx.Close()
	}()

	if isTerm {
		old, err := term.MakeRaw(int(r.In.Fd()))
		if err != nil {
			cmd.Process.Kill()
			cmd.Wait()
			return 0, errs.Wrap(errs.Internal, err, "cannot put the terminal in raw mode")
		}
		// Restored on every way out of Run, the child's death included.
		defer term.Restore(int(r.In.Fd()), old)
		winch := make(chan os.Signal, 1)
		signal.Notify(winch, syscall.SIGWINCH)
		defer signal.Stop(winch)
		go func() {
			for range winch {
				r.mu.Lock()
				if r.ptmx != nil {
					pty.InheritSize(r.In, r.ptmx)
				}
				r.mu.Unlock()
				if ws, err := pty.GetsizeFull(r.In); err == nil && r.Resized != nil {
					r.Resized(int(ws.Cols), int(ws.Rows))
				}
			}
		}()
	}
	if r.In != nil {
		go r.pumpInput()
	}
	// The child's output until the PTY reports EIO (no more slaves open),
	// or, once the child has exited, for drainAfterExit at most: a process it
	// left behind (Codex leaves a daemon) may hold the terminal for good.
	outDone := make(chan error, 1)
	go func() { outDone <- r.relayOutput(ptmx) }()
	cmd.Wait() // the status is read from ProcessState
	r.childPID.Store(0)
	exited := time.Now()
	var copyErr error
	tick := time.NewTicker(drainAfterExit / 10)
	defer tick.Stop()
drain:
	for {
		select {
		case copyErr = <-outDone:
			break drain
		case <-tick.C:
			// Given up only while the relay waits in Read with nothing
			// coming: never in the middle of relaying a chunk.
			// A process the child left behind that keeps writing is not
			// followed for ever either.
			// Output the terminal holds unread is never silence: on a
			// loaded machine the relay may not have been scheduled to read
			// what the child wrote last before it exited.
			last := max(exited.UnixNano(), r.lastOutput.Load())
			silent := r.inRead.Load() && time.Since(time.Unix(0, last)) >= drainAfterExit && unread(ptmx) == 0
			if silent || time.Since(exited) >= 10*drainAfterExit {
				break drain
			}
		}
	}
	if copyErr != nil && !errors.Is(copyErr, syscall.EIO) {
		return exitStatus(cmd), errs.Wrap(errs.Internal, copyErr, "relaying output")
	}
	return exitStatus(cmd), nil
}

// unread is how many bytes of output the terminal holds that the relay has
// not read yet (0 when that cannot be asked).
func unread(ptmx *os.File) int {
	n := 0
	if rc, err := ptmx.SyscallConn(); err == nil {
		rc.Control(func(fd uintptr) { n, _ = unix.IoctlGetInt(int(fd), unix.TIOCINQ) })
	}
	return n
}

// pumpInput passes the operator's bytes to the child as they come.
func (r *Relay) pumpInput() {
	buf := make([]byte, 32*1024)
	for {
		n, err := r.In.Read(buf)
		if n > 0 {
			p := buf[:n]
			if r.FilterInput != nil {
				p = r.FilterInput(p)
			}
			if len(p) > 0 {
				if _, werr := r.WriteInput(p); werr != nil {
					return
				}
			}
		}
		if err != nil {
			return
		}
	}
}

// WriteInput writes to the child's input under the lock every writer shares,
// so typed keys and delivered text never interleave.
func (r *Relay) WriteInput(p []byte) (int, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ptmx == nil {
		return 0, os.ErrClosed
	}
	return r.ptmx.Write(p)
}

// Moment says when a delivery may go in: once the child's output has been
// quiet for Quiet and Busy (the operator is mid-line) is false, but after
// MaxWait in any case: a message is never held forever.
type Moment struct {
	Quiet, MaxWait time.Duration
	Busy           func() bool
}

// AwaitMoment waits for a good moment to deliver and reports whether one came
// (false: MaxWait ran out first). The input lock is not held while waiting,
// so the operator keeps typing.
func (r *Relay) AwaitMoment(m Moment) (quiet bool, waited time.Duration) {
	start := time.Now()
	for {
		idle := r.Idle()
		if idle >= m.Quiet && (m.Busy == nil || !m.Busy()) {
			return true, time.Since(start)
		}
		if time.Since(start) >= m.MaxWait {
			return false, time.Since(start)
		}
		time.Sleep(min(10*time.Millisecond, max(m.Quiet-idle, time.Millisecond)))
	}
}

// ChildPID is the child's process id, 0 before it started or once it has
// exited. It takes no lock: a delivery asks it while it holds the input
// lock.
func (r *Relay) ChildPID() int { return int(r.childPID.Load()) }

// Output counts the bytes the child has written so far.
func (r *Relay) Output() uint64 { return r.output.Load() }

// Idle is how long the child has written nothing.
func (r *Relay) Idle() time.Duration { return time.Since(time.Unix(0, r.lastOutput.Load())) }

// Exclusive runs fn holding the input lock: the operator's keys wait until
// it returns, so they never land inside what fn writes with write.
func (r *Relay) Exclusive(fn func(write func(p []byte) error) error) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ptmx == nil {
		return os.ErrClosed
	}
	return fn(func(p []byte) error {
		_, err := r.ptmx.Write(p)
		return err
	})
}

// Signal sends sig to the child's process group (the PTY's session), as the
// terminal would.
func (r *Relay) Signal(sig syscall.Signal) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.proc == nil {
		return os.ErrProcessDone
	}
	return syscall.Kill(-r.proc.Pid, sig)
}

// childSize is the size of the child's terminal.
func (r *Relay) childSize() (*pty.Winsize, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.ptmx == nil {
		return nil, os.ErrNotExist
	}
	return pty.GetsizeFull(r.ptmx)
}

func exitStatus(cmd *exec.Cmd) int {
	st := cmd.ProcessState
	if st == nil {
		return 1
	}
	if ws, ok := st.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return st.ExitCode()
}
