// Package lockfile holds advisory file locks (flock) that the kernel releases
// when the holder dies, so a crashed service never leaves a stale lock.
package lockfile

import (
	"context"
	"errors"
	"os"
	"strconv"
	"strings"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/errs"
)

// Lock is a held lock.
type Lock struct{ f *os.File }

// ErrHeld is returned by TryLock when another process holds the lock.
var ErrHeld = errors.New("lock is held by another process")

// TryLock takes the exclusive lock on path (created 0600) without waiting and
// writes the holder's pid into the file for diagnostics.
func TryLock(path string) (*Lock, error) { return TryLockFor(path, "") }

// TryLockFor is TryLock for a holder that is not the lock's usual owner:
// what it does ("purge") is written after its pid, so whoever finds the lock
// held can say who holds it (Holder).
func TryLockFor(path, what string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot open lock file")
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, ErrHeld
		}
		return nil, errs.Wrap(errs.Storage, err, "cannot lock %s", path)
	}
	if err := f.Truncate(0); err == nil {
		note := strconv.Itoa(os.Getpid())
		if what != "" {
			note += " " + what
		}
		f.WriteAt([]byte(note+"\n"), 0)
	}
	return &Lock{f: f}, nil
}

// Acquire waits for the lock until ctx ends, checking every few milliseconds
// (flock has no timeout of its own).
func Acquire(ctx context.Context, path string) (*Lock, error) {
	pace := backoff.Policy{Min: 2 * time.Millisecond, Max: 50 * time.Millisecond}
	delay := pace.Min
	for {
		l, err := TryLock(path)
		if !errors.Is(err, ErrHeld) {
			return l, err
		}
		select {
		case <-ctx.Done():
			return nil, errs.New(errs.Timeout, "timed out waiting for lock %s (held by pid %d)", path, HolderPID(path))
		case <-time.After(delay):
		}
		delay = pace.Next(delay)
	}
}

// Release gives the lock up.
func (l *Lock) Release() error {
	if l == nil || l.f == nil {
		return nil
	}
	err := l.f.Close() // closing the descriptor releases the flock
	l.f = nil
	return err
}

// HolderPID reads the pid the last holder wrote, or 0.
func HolderPID(path string) int {
	pid, _ := Holder(path)
	return pid
}

// Holder reads the pid the last holder wrote (0 when none) and what it said
// it does ("" for the lock's usual owner; see TryLockFor).
func Holder(path string) (pid int, what string) {
	b, err := os.ReadFile(path)
	if err != nil {
		return 0, ""
	}
	first, what, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	pid, _ = strconv.Atoi(first)
	return pid, what
}
