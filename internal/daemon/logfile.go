package daemon

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"sync"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

// LogFile is a detached service's log file, rotated by size: a write that
// would take it over its size first moves it to NAME.1 (NAME.1 to NAME.2,
// and so on; the oldest beyond the count kept is deleted) and begins a new
// one. A service that logs the same warning all day therefore takes at
// most (keep+1) × size on disk ([log] in the config).
//
// The launcher pointed the service's standard output and error at the log
// file (spawn), and they stay there: the runtime writes a crash trace to
// descriptor 2, a library may write its own lines there. So every
// descriptor on the file appends (O_APPEND: no writer overwrites
// another's lines), and after each rotation follow is handed the new file
// (FollowStdio points descriptors 1 and 2 at it), so that what is written
// there lands in the current file, not in one about to be deleted.
//
// It is ours rather than lumberjack's, the usual rotation: lumberjack opens
// the file it rotates to without O_APPEND, so its next line overwrites
// whatever another descriptor appended (the stderr line of
// TestDetachedDaemonLogIsRotatedAndFollowed was lost so), it tells no one
// that it rotated, and it deletes old files from a goroutine of its own
// that a daemon's exit can cut short.
type LogFile struct {
	path   string
	max    int64
	keep   int
	follow func(*os.File) error

	mu   sync.Mutex
	f    *os.File
	size int64
	// retryAt is the size at which a rotation that failed (no descriptor
	// left, say) is tried again: not at every line, which would cost a
	// failed open each.
	retryAt int64
}

// OpenLog opens the log file at path for appending (made 0600 if it is not
// there, and made 0600 if it is), rotated before it grows over maxBytes,
// keeping keep old files (at least one). follow, when not nil, is handed
// the file now and the new one after each rotation.
func OpenLog(path string, maxBytes int64, keep int, follow func(*os.File) error) (*LogFile, error) {
	f, err := openLogFile(path, os.O_CREATE)
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot open log file")
	}
	fi, err := f.Stat()
	if err == nil {
		err = f.Chmod(0o600)
	}
	if err == nil && follow != nil {
		err = follow(f)
	}
	if err != nil {
		f.Close()
		return nil, errs.Wrap(errs.Storage, err, "log file %s", path)
	}
	return &LogFile{path: path, max: max(maxBytes, 1), keep: max(keep, 1), follow: follow, f: f, size: fi.Size()}, nil
}

// openLogFile opens path for appending, never through a symbolic link.
func openLogFile(path string, flags int) (*os.File, error) {
	return os.OpenFile(path, os.O_WRONLY|os.O_APPEND|unix.O_NOFOLLOW|flags, 0o600)
}

// Write appends p to the log file, after rotating it when p would take it
// over its size. A write is never split between two files.
func (l *LogFile) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return 0, fs.ErrClosed
	}
	if l.size > 0 && l.size+int64(len(p)) > l.max && l.size >= l.retryAt {
		if err := l.rotate(); err != nil {
			l.retryAt = l.size + l.max/16
		}
	}
	n, err := l.f.Write(p)
	l.size += int64(n)
	return n, err
}

// rotate opens the new file first, so that when it cannot nothing has
// moved and the lines go on into the old one; mu is held.
func (l *LogFile) rotate() error {
	next := l.path + ".new"
	os.Remove(next) // a rotation cut short before
	f, err := openLogFile(next, os.O_CREATE|os.O_EXCL)
	if err != nil {
		return err
	}
	os.Remove(l.backup(l.keep))
	for i := l.keep - 1; i >= 1; i-- {
		if err := os.Rename(l.backup(i), l.backup(i+1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
			f.Close()
			os.Remove(next)
			return err
		}
	}
	if err := os.Rename(l.path, l.backup(1)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		f.Close()
		os.Remove(next)
		return err
	}
	if err := os.Rename(next, l.path); err != nil {
		f.Close()
		return err
	}
	l.f.Close()
	l.f, l.size, l.retryAt = f, 0, 0
	if l.follow != nil {
		l.follow(f) // nothing to do if it cannot: the log itself goes on
	}
	return nil
}

// backup is the name of the i-th newest old file.
func (l *LogFile) backup(i int) string { return fmt.Sprintf("%s.%d", l.path, i) }

// Close closes the file; a later Write fails.
func (l *LogFile) Close() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.f == nil {
		return nil
	}
	err := l.f.Close()
	l.f = nil
	return err
}

// FollowStdio points the process's standard output and error at f: a
// detached service's, whose log file was rotated, so that what is written
// there without the logger (a crash trace) lands in the current file.
func FollowStdio(f *os.File) error {
	for _, fd := range []int{1, 2} {
		if err := unix.Dup2(int(f.Fd()), fd); err != nil {
			return err
		}
	}
	return nil
}
