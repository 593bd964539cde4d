package doctor

import (
	"github.com/dustin/go-humanize"

	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"golang.org/x/sys/unix"

	"github.com/tmux-amq/tamq/internal/paths"
)

// Socket checks the service's socket and its directory. The socket is how
// commands, brokers and the other program reach the service and what they
// trust: a directory others can enter or write lets them take the socket's
// name while the service is down and receive every message. So the directory
// must be the user's and 0700, and the socket, when there, the user's and
// 0600, as the service makes them.
func Socket(p paths.Paths) Check {
	const name = "socket"
	dir := filepath.Dir(p.Socket)
	move := fmt.Sprintf("set XDG_RUNTIME_DIR (or %s) to a private directory of your own", p.SocketVar())
	var st unix.Stat_t
	err := unix.Stat(dir, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return ok(name, fmt.Sprintf("%s: its directory %s does not exist yet; the service makes it 0700 when it starts", p.Socket, dir))
	case err != nil:
		return fail(name, fmt.Sprintf("cannot inspect socket directory %s: %v", dir, err), move)
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fail(name, fmt.Sprintf("socket directory %s is not a directory", dir), "move it away, or "+move)
	case st.Uid != uint32(os.Getuid()) && st.Uid == 0 && st.Mode&unix.S_ISVTX != 0:
		// /tmp and the like: the service accepts it (sticky), but anyone may
		// bind the socket's name there while the service is down.
		return warn(name, fmt.Sprintf("socket directory %s is shared with other users (owned by root, mode %04o): another user could take the name %s while the service is down",
			dir, st.Mode&0o7777, filepath.Base(p.Socket)), move)
	case st.Uid != uint32(os.Getuid()):
		return fail(name, fmt.Sprintf("socket directory %s is owned by uid %d, not by you (uid %d)", dir, st.Uid, os.Getuid()), move)
	case st.Mode&0o077 != 0:
		return fail(name, fmt.Sprintf("socket directory %s has mode %04o; it must be private to you (0700)", dir, st.Mode&0o7777),
			fmt.Sprintf("chmod 700 %s", dir))
	}
	err = unix.Lstat(p.Socket, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return ok(name, fmt.Sprintf("%s is private (0700); no socket in it (the service is not running)", dir))
	case err != nil:
		return fail(name, fmt.Sprintf("cannot inspect socket %s: %v", p.Socket, err), move)
	case st.Mode&unix.S_IFMT != unix.S_IFSOCK:
		return fail(name, fmt.Sprintf("%s is not a socket (someone may have planted it)", p.Socket), "move it away if it is yours; else "+move)
	case st.Uid != uint32(os.Getuid()):
		return fail(name, fmt.Sprintf("socket %s is owned by uid %d, not by you (uid %d): another user may be waiting there for your messages", p.Socket, st.Uid, os.Getuid()), move)
	case st.Mode&0o177 != 0:
		return fail(name, fmt.Sprintf("socket %s has mode %04o; it must be 0600", p.Socket, st.Mode&0o7777),
			fmt.Sprintf("chmod 600 %s (restarting the service makes it 0600 again)", p.Socket))
	}
	return ok(name, fmt.Sprintf("%s is yours and 0600, in a 0700 directory", p.Socket))
}

// StateDir checks the state directory, which holds the database, the log
// and the locks: it must be the user's and 0700 (the service makes it so;
// a directory made by hand, or chmodded, may not be).
func StateDir(p paths.Paths) Check {
	const name = "state-dir"
	var st unix.Stat_t
	err := unix.Stat(p.StateDir, &st)
	switch {
	case errors.Is(err, unix.ENOENT):
		return ok(name, fmt.Sprintf("%s does not exist yet; the service makes it 0700 when it starts", p.StateDir))
	case err != nil:
		return fail(name, fmt.Sprintf("cannot inspect state directory %s: %v", p.StateDir, err), "check the permissions of its parents")
	case st.Mode&unix.S_IFMT != unix.S_IFDIR:
		return fail(name, fmt.Sprintf("state directory %s is not a directory", p.StateDir), "move it away")
	case st.Uid != uint32(os.Getuid()):
		return fail(name, fmt.Sprintf("state directory %s is owned by uid %d, not by you (uid %d)", p.StateDir, st.Uid, os.Getuid()),
			fmt.Sprintf("move it away, or set XDG_STATE_HOME (or %s_STATE_DIR) to a directory of your own", envPrefix(p)))
	case st.Mode&0o077 != 0:
		return fail(name, fmt.Sprintf("state directory %s has mode %04o; it must be private to you (0700): it holds every message", p.StateDir, st.Mode&0o7777),
			fmt.Sprintf("chmod 700 %s", p.StateDir))
	}
	return ok(name, p.StateDir+" is yours and 0700")
}

// envPrefix is the start of the program's variables (TAMQ, COORDINATION_ENGINE).
func envPrefix(p paths.Paths) string {
	v := p.SocketVar()
	return v[:len(v)-len("_SOCKET")]
}

// The disk space thresholds: under failBelow writes are about to fail; under
// warnBelow, or under twice the database (a migration backs it up, a purge
// rewrites it), they will soon.
const (
	diskFailBelow = 64 << 20
	diskWarnBelow = 1 << 30
)

// Disk checks the free space in the file system of dir, given the size of
// the database there; fix says how to make room for this program.
func Disk(dir string, free, dbSize int64, fix string) Check {
	const name = "disk"
	have := fmt.Sprintf("%s free in the file system of %s (database %s)", bytesText(free), dir, bytesText(dbSize))
	switch {
	case free < diskFailBelow:
		return fail(name, have+fmt.Sprintf(": under %s, writes to the database are about to fail", bytesText(diskFailBelow)), fix)
	case free < diskWarnBelow:
		return warn(name, have+fmt.Sprintf(": under %s", bytesText(diskWarnBelow)), fix)
	case free < 2*dbSize:
		return warn(name, have+": under twice the database, which a migration's backup or a purge needs", fix)
	}
	return ok(name, have)
}

// DiskAt is Disk for the file system that holds (or will hold) dir, with the
// database and its WAL measured.
func DiskAt(dir, database, fix string) Check {
	at := dir
	var st unix.Statfs_t
	// The directory may not exist yet: its nearest parent that does is on
	// the file system it will be made in.
	for {
		err := unix.Statfs(at, &st)
		if err == nil {
			break
		}
		parent := filepath.Dir(at)
		if !errors.Is(err, unix.ENOENT) || parent == at {
			return warn("disk", fmt.Sprintf("cannot read the free space of %s: %v", at, err), "check it with `df -h "+at+"`")
		}
		at = parent
	}
	var size int64
	for _, f := range []string{database, database + "-wal"} {
		if fi, err := os.Stat(f); err == nil {
			size += fi.Size()
		} else if !errors.Is(err, fs.ErrNotExist) {
			return warn("disk", fmt.Sprintf("cannot read the size of %s: %v", f, err), "check its permissions")
		}
	}
	return Disk(dir, int64(st.Bavail)*int64(st.Bsize), size, fix)
}

// bytesText is a size as a person reads a disk's: powers of 1024.
func bytesText(n int64) string { return humanize.IBytes(uint64(max(n, 0))) }
