package unixrpc

import (
	"errors"
	"io/fs"
	"os"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/errs"
)

// A client types what its service sends into the user's terminals, and sends
// it message bodies: it must talk to a service of its own user and nobody
// else. These checks run before a byte is written.

// CheckPrivateDir checks dir as tmux checks /tmp/tmux-<uid>: a real directory
// (not a symbolic link), owned by the user, with no permission for anyone
// else. With create it is made (0700) when missing; a client passes false, so
// a missing directory reads as "not running".
func CheckPrivateDir(dir string, create bool) error {
	if create {
		if err := os.Mkdir(dir, 0o700); err != nil && !errors.Is(err, fs.ErrExist) {
			return errs.Wrap(errs.Storage, err, "cannot create the private socket directory %s", dir)
		}
	}
	var st unix.Stat_t
	if err := unix.Lstat(dir, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: dir, Err: err}
	}
	uid := uint32(os.Getuid())
	refuse := func(format string, args ...any) error {
		return errs.New(errs.PermissionDeny, "socket directory %s "+format, append([]any{dir}, args...)...).
			WithHint("if it is yours, remove it and try again; else set XDG_RUNTIME_DIR to a private directory of your own")
	}
	switch {
	case st.Mode&unix.S_IFMT == unix.S_IFLNK:
		return refuse("is a symbolic link; refusing to follow it (someone may have planted it)")
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return refuse("is not a directory; refusing to use it (someone may have planted it)")
	case st.Uid != uid:
		return refuse("is owned by uid %d, not by you (uid %d); refusing to use it (another user may have made it to catch your messages)", st.Uid, uid)
	case st.Mode&0o077 != 0:
		return refuse("has mode %04o; it must be private to you (0700)", st.Mode&0o7777)
	}
	return nil
}

// checkSocketFile refuses, before connecting, a socket path that is not a
// socket or whose socket belongs to another user: saying so is clearer than
// the peer check below, which alone is decisive.
func checkSocketFile(path string, n Names) error {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	if st.Mode&unix.S_IFMT != unix.S_IFSOCK {
		return errs.New(errs.Conflict, "%s is not a socket; refusing to use it (someone may have planted it)", path).
			WithHint("move it away if it is yours; else %s", n.MoveSocket())
	}
	if uid := uint32(os.Getuid()); st.Uid != uid {
		return errs.New(errs.PermissionDeny, "socket %s is owned by uid %d, not by you (uid %d); refusing to talk to it", path, st.Uid, uid).
			WithHint("another user may be waiting there for your messages; %s", n.MoveSocket())
	}
	return nil
}

// CheckPeerFD refuses a connected socket whose listening process is not of
// the user's own uid, as the kernel reports it (SO_PEERCRED): a socket file
// can be chowned, the process behind it cannot be faked.
func CheckPeerFD(fd int, path string, n Names) error {
	cred, err := unix.GetsockoptUcred(fd, unix.SOL_SOCKET, unix.SO_PEERCRED)
	if err != nil {
		return errs.Wrap(errs.Unavailable, err, "cannot tell who listens on %s", path)
	}
	if uid := uint32(os.Getuid()); cred.Uid != uid {
		return errs.New(errs.PermissionDeny, "the process listening on %s (pid %d) runs as uid %d, not as you (uid %d); refusing to send it anything", path, cred.Pid, cred.Uid, uid).
			WithHint("another user may be waiting there for your messages; %s", n.MoveSocket())
	}
	return nil
}

// CheckBeforeDial runs the checks due before connecting to path: the
// directory that must be private (when privateDir is not ""), then the
// socket file itself.
func CheckBeforeDial(path, privateDir string, n Names) error {
	if privateDir != "" {
		if err := CheckPrivateDir(privateDir, false); err != nil {
			return err
		}
	}
	return checkSocketFile(path, n)
}

// Peer is the authenticated identity of a connection's other end.
type Peer struct {
	PID int32
	UID uint32
	GID uint32
}
