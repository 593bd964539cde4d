// Package sockowner says who is on the other end of a local connection,
// before a client writes a byte to it. While nothing listens on a loopback
// port or a socket path, any local user may bind it and wait for what the
// user's own service would receive: State Hub's token, etcd's password.
// So a client that sends a secret to a local peer checks, on every
// connection it makes:
//
//   - a loopback port: the listening socket, found in /proc/net/tcp and
//     /proc/net/tcp6, must belong to the user or to root (CheckLoopback);
//   - a Unix socket: the socket file must be owned by the user or root
//     (SocketFile), and the process listening on it must run as the user or
//     root, as the kernel says (PeerUID, SO_PEERCRED): a file can be
//     chowned, the process behind it cannot be faked.
//
// Root is trusted: it can read the user's secrets anyway. The package only
// tells; the callers (internal/statehub, internal/cluster) word the refusal
// for what they were about to send.
package sockowner

import (
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/netip"
	"os"
	"strconv"
	"strings"

	"golang.org/x/sys/unix"
)

// OwnerFunc says who owns the socket with this inode (a socket file's, or
// a listening TCP socket's as /proc/net/tcp lists it), when it knows better
// than the system. Only tests set it, to make a listener of their own look
// like another user's where they cannot run one as another user.
type OwnerFunc func(inode uint64) (uid uint32, ok bool)

// Owner is the owner of the socket with inode: f's word when it has one,
// else uid (the system's).
func (f OwnerFunc) Owner(inode uint64, uid uint32) uint32 {
	if f != nil {
		if u, ok := f(inode); ok {
			return u
		}
	}
	return uid
}

// Trusted is whether a socket owned by uid may be the user's own service's.
func Trusted(uid uint32) bool { return uid == uint32(os.Getuid()) || uid == 0 }

// ErrNoListener is CheckLoopback's answer when /proc lists no listening
// socket for the port the connection reached: who took it cannot be told.
var ErrNoListener = errors.New("no listening socket for the port in /proc/net/tcp")

// Foreign is CheckLoopback's refusal: the listening socket of a loopback
// port is another user's.
type Foreign struct {
	Addr netip.AddrPort // where the connection went
	UID  uint32         // the owner of the listening socket
}

func (f *Foreign) Error() string {
	return fmt.Sprintf("port %d (%s) is held by uid %d, not by you (uid %d) or root", f.Addr.Port(), f.Addr, f.UID, os.Getuid())
}

// CheckLoopback checks a connected TCP connection whose other end is this
// machine: nil when the listening socket that took it is the user's or
// root's (or the other end is not a loopback address, which the caller
// judges otherwise), *Foreign when it is another user's, and an error
// wrapping ErrNoListener or /proc's failure when it cannot be told. It
// runs once connected, before a byte is written: the listener checked is
// the one that took the connection, not one that was there a moment
// before.
func CheckLoopback(conn net.Conn, ownerOf OwnerFunc) error {
	ra, ok := conn.RemoteAddr().(*net.TCPAddr)
	if !ok {
		return nil
	}
	ap := ra.AddrPort()
	if !ap.Addr().Unmap().IsLoopback() {
		return nil
	}
	ls, err := Listeners(ap)
	if err != nil {
		return err
	}
	if len(ls) == 0 {
		return ErrNoListener
	}
	for _, l := range ls {
		if uid := ownerOf.Owner(l.Inode, l.UID); !Trusted(uid) {
			return &Foreign{Addr: ap, UID: uid}
		}
	}
	return nil
}

// Listener is a listening socket of /proc/net/tcp or /proc/net/tcp6.
type Listener struct {
	Inode uint64
	UID   uint32
}

// Listeners lists the listening sockets a connection to ap may have
// reached: bound to its address, or to the wildcard of its family (an IPv6
// wildcard takes IPv4 too unless it is v6-only, which /proc does not say).
func Listeners(ap netip.AddrPort) ([]Listener, error) {
	var out []Listener
	for _, f := range []string{"/proc/net/tcp", "/proc/net/tcp6"} {
		b, err := os.ReadFile(f)
		if errors.Is(err, fs.ErrNotExist) { // a kernel without IPv6
			continue
		}
		if err != nil {
			return nil, err
		}
		out = append(out, ParseListeners(string(b), ap)...)
	}
	return out, nil
}

// ParseListeners reads a /proc/net/tcp table: after a header line, one
// socket a line, "sl local_address rem_address st ... uid timeout inode ...".
func ParseListeners(table string, want netip.AddrPort) []Listener {
	const listen = "0A" // TCP_LISTEN
	var out []Listener
	lines := strings.Split(table, "\n")
	for _, line := range lines[min(1, len(lines)):] {
		f := strings.Fields(line)
		if len(f) < 10 || f[3] != listen {
			continue
		}
		local, ok := parseProcAddr(f[1])
		if !ok || local.Port() != want.Port() || !reaches(local.Addr(), want.Addr()) {
			continue
		}
		uid, err1 := strconv.ParseUint(f[7], 10, 32)
		inode, err2 := strconv.ParseUint(f[9], 10, 64)
		if err1 != nil || err2 != nil {
			continue
		}
		out = append(out, Listener{Inode: inode, UID: uint32(uid)})
	}
	return out
}

// reaches says whether a socket bound to bound takes connections to to.
func reaches(bound, to netip.Addr) bool {
	to = to.Unmap()
	if bound.Unmap() == to {
		return true
	}
	return bound.IsUnspecified() && (bound.Is6() || to.Is4())
}

// parseProcAddr reads "0100007F:1F40": the address as the kernel prints it,
// each 32-bit word as a number in host byte order, and the port in hex.
func parseProcAddr(s string) (netip.AddrPort, bool) {
	h, p, ok := strings.Cut(s, ":")
	port, err := strconv.ParseUint(p, 16, 16)
	raw, herr := hex.DecodeString(h)
	if !ok || err != nil || herr != nil || len(raw) != 4 && len(raw) != 16 {
		return netip.AddrPort{}, false
	}
	b := make([]byte, len(raw))
	for i := 0; i < len(raw); i += 4 {
		binary.NativeEndian.PutUint32(b[i:], binary.BigEndian.Uint32(raw[i:]))
	}
	a, _ := netip.AddrFromSlice(b)
	return netip.AddrPortFrom(a, uint16(port)), true
}

// SocketFile says what is at path, not following a symbolic link: whether
// it is a socket, and its owner (ownerOf's word first) and inode.
func SocketFile(path string, ownerOf OwnerFunc) (isSocket bool, uid uint32, err error) {
	var st unix.Stat_t
	if err := unix.Lstat(path, &st); err != nil {
		return false, 0, &fs.PathError{Op: "lstat", Path: path, Err: err}
	}
	return st.Mode&unix.S_IFMT == unix.S_IFSOCK, ownerOf.Owner(st.Ino, st.Uid), nil
}

// PeerUID is the uid and pid of the process at the other end of a
// connected Unix socket, as the kernel recorded them when it listened
// (SO_PEERCRED).
func PeerUID(conn *net.UnixConn) (uid uint32, pid int32, err error) {
	raw, err := conn.SyscallConn()
	if err != nil {
		return 0, 0, err
	}
	var cred *unix.Ucred
	var getErr error
	ctlErr := raw.Control(func(fd uintptr) { cred, getErr = unix.GetsockoptUcred(int(fd), unix.SOL_SOCKET, unix.SO_PEERCRED) })
	if err := errors.Join(ctlErr, getErr); err != nil {
		return 0, 0, err
	}
	return cred.Uid, cred.Pid, nil
}
