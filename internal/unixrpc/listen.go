package unixrpc

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"syscall"
	"time"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Listener is a Unix socket listener whose file is private to its owner.
type Listener struct {
	*net.UnixListener
	Path string
	// ino and ctime identify our socket file: an inode number alone can be
	// reused by a successor's socket once ours is gone.
	ino   uint64
	ctime unix.Timespec
}

// Listen binds a Unix socket at path so that it is never reachable with wider
// permissions than 0600: it is bound inside a fresh 0700 directory, set to 0600
// there, and only then hard-linked into place (a link, unlike a rename, never
// replaces a socket someone else put there meanwhile).
//
// It refuses a path that exists and is not a socket, a socket owned by another
// user, a socket some process still listens on, and a parent directory that
// others may write without the sticky bit. A stale socket (nobody listens) of
// ours is removed first.
func Listen(path string, n Names) (*Listener, error) {
	if err := CheckSocketPath(path, n); err != nil {
		return nil, err
	}
	dir := filepath.Dir(path)
	tmp, err := os.MkdirTemp(dir, ".bind-")
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot prepare socket %s", path)
	}
	defer os.RemoveAll(tmp)
	bound := filepath.Join(tmp, "s")
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: bound, Net: "unix"})
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot bind socket %s", path)
	}
	// We remove the socket ourselves, only if it is still ours (see Remove).
	ln.SetUnlinkOnClose(false)
	fail := func(err error) (*Listener, error) {
		ln.Close()
		return nil, err
	}
	if err := os.Chmod(bound, 0o600); err != nil {
		return fail(errs.Wrap(errs.Storage, err, "cannot set mode of socket %s", path))
	}
	if err := os.Link(bound, path); err != nil {
		if errors.Is(err, fs.ErrExist) {
			return fail(errs.New(errs.AlreadyRunning, "socket %s appeared while starting; another service is starting", path))
		}
		return fail(errs.Wrap(errs.Storage, err, "cannot create socket %s", path))
	}
	// Drop the bind directory first: unlinking the temporary name changes the
	// inode's ctime, which must be final when it is recorded.
	os.RemoveAll(tmp)
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return fail(errs.Wrap(errs.Storage, err, "cannot stat socket %s", path))
	}
	return &Listener{UnixListener: ln, Path: path, ino: st.Ino, ctime: st.Ctim}, nil
}

// CheckSocketPath does Listen's checks without binding: the service runs it
// before touching its database, so a start that must fail fails first.
func CheckSocketPath(path string, n Names) error {
	if err := checkParent(filepath.Dir(path), n); err != nil {
		return err
	}
	return clearStale(path, n)
}

// Remove deletes the socket file if it is still the one this listener created,
// so a stopping service never removes a successor's socket.
func (l *Listener) Remove() error {
	var st unix.Stat_t
	if err := unix.Lstat(l.Path, &st); err != nil {
		if errors.Is(err, unix.ENOENT) {
			return nil
		}
		return err
	}
	if st.Ino != l.ino || st.Ctim != l.ctime {
		return nil
	}
	return os.Remove(l.Path)
}

// checkParent creates a missing parent 0700 and refuses one that other users
// could use to swap the socket: owned by someone else, or writable by others
// without the sticky bit (which is what makes /tmp acceptable).
func checkParent(dir string, n Names) error {
	fi, err := os.Stat(dir)
	if errors.Is(err, fs.ErrNotExist) {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return errs.Wrap(errs.Storage, err, "cannot create socket directory %s", dir)
		}
		return os.Chmod(dir, 0o700)
	}
	if err != nil {
		return errs.Wrap(errs.Storage, err, "cannot use socket directory %s", dir)
	}
	if !fi.IsDir() {
		return errs.New(errs.Storage, "socket directory %s is not a directory", dir)
	}
	st := fi.Sys().(*syscall.Stat_t)
	uid := uint32(os.Getuid())
	sticky := fi.Mode()&fs.ModeSticky != 0
	if st.Uid != uid && st.Uid != 0 {
		return errs.New(errs.PermissionDeny, "socket directory %s is owned by uid %d, not by you (uid %d)", dir, st.Uid, uid).
			WithHint("%s", n.MoveSocket())
	}
	if fi.Mode().Perm()&0o022 != 0 && !sticky {
		return errs.New(errs.PermissionDeny, "socket directory %s is writable by others (mode %o)", dir, fi.Mode().Perm()).
			WithHint("make it private (chmod go-w), or %s", n.MoveSocket())
	}
	return nil
}

// clearStale checks what is at path: nothing is fine; a stale socket of ours
// is removed once a dial proves nobody listens; everything else is refused and
// left alone.
func clearStale(path string, n Names) error {
	fi, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil
	}
	if err != nil {
		return errs.Wrap(errs.Storage, err, "cannot check socket path %s", path)
	}
	if fi.Mode()&fs.ModeSocket == 0 {
		return errs.New(errs.Conflict, "%s exists and is not a socket; refusing to touch it", path).
			WithHint("move it away, or %s", n.MoveSocket())
	}
	uid := uint32(os.Getuid())
	if owner := fi.Sys().(*syscall.Stat_t).Uid; owner != uid {
		return errs.New(errs.PermissionDeny, "socket %s is owned by uid %d, not by you (uid %d); refusing to use or remove it", path, owner, uid).
			WithHint("%s", n.MoveSocket())
	}
	conn, err := net.DialTimeout("unix", path, time.Second)
	if err == nil {
		conn.Close()
		return errs.New(errs.AlreadyRunning, "a service is already listening on %s", path).
			WithHint("see `%s status`; stop it with `%s stop`", n.Name(), n.Name())
	}
	if !errors.Is(err, syscall.ECONNREFUSED) {
		return errs.Wrap(errs.Storage, err, "cannot tell whether socket %s is stale", path)
	}
	if err := os.Remove(path); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(errs.Storage, err, "cannot remove stale socket %s", path)
	}
	return nil
}

// PeerOf reads the kernel's credentials of the process at the other end.
func PeerOf(c *net.UnixConn) (Peer, error) {
	raw, err := c.SyscallConn()
	if err != nil {
		return Peer{}, err
	}
	var cred *unix.Ucred
	var credErr error
	if err := raw.Control(func(fd uintptr) {
		cred, credErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED)
	}); err != nil {
		return Peer{}, err
	}
	if credErr != nil {
		return Peer{}, fmt.Errorf("SO_PEERCRED: %w", credErr)
	}
	return Peer{PID: cred.Pid, UID: cred.Uid, GID: cred.Gid}, nil
}
