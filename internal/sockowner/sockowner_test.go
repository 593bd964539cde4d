package sockowner_test

import (
	"encoding/binary"
	"errors"
	"fmt"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/sockowner"
	"github.com/tmux-amq/tamq/internal/testutil"
)

const nobody = 65534

// The listening sockets a connection to a loopback port may reach, as
// /proc/net/tcp and /proc/net/tcp6 print them: the address itself, the
// wildcard of its family, an IPv6 wildcard (dual stack); never another
// port, another address or a socket that is not listening.
func TestParseListeners(t *testing.T) {
	word := func(b0, b1, b2, b3 byte) string { // a 32-bit word as the kernel prints it
		return fmt.Sprintf("%08X", binary.NativeEndian.Uint32([]byte{b0, b1, b2, b3}))
	}
	lo4 := word(127, 0, 0, 1)
	any4 := word(0, 0, 0, 0)
	zero := word(0, 0, 0, 0)
	lo6 := zero + zero + zero + word(0, 0, 0, 1)
	mapped := zero + zero + word(0, 0, 0xff, 0xff) + lo4
	row := func(addr, port, st string, uid, inode int) string {
		return fmt.Sprintf("   0: %s:%s 00000000:0000 %s 00000000:00000000 00:00000000 00000000 %5d        0 %d 1 0000000000000000 100 0 0 10 0\n", addr, port, st, uid, inode)
	}
	header := "  sl  local_address rem_address   st tx_queue rx_queue tr tm->when retrnsmt   uid  timeout inode\n"
	tcp4 := header + row(lo4, "1F40", "0A", 1000, 11) + row(any4, "1F40", "0A", 1001, 12) + row(lo4, "1F41", "0A", 1002, 13) +
		row(lo4, "1F40", "01", 1003, 14) + row(word(10, 0, 0, 1), "1F40", "0A", 1004, 15)
	tcp6 := header + row(zero+zero+zero+zero, "1F40", "0A", 1005, 16) + row(mapped, "1F40", "0A", 1006, 17) + row(lo6, "1F40", "0A", 1007, 18)
	to4 := netip.MustParseAddrPort("127.0.0.1:8000")
	if got := append(sockowner.ParseListeners(tcp4, to4), sockowner.ParseListeners(tcp6, to4)...); !slices.Equal(got, []sockowner.Listener{{11, 1000}, {12, 1001}, {16, 1005}, {17, 1006}}) {
		t.Errorf("to 127.0.0.1:8000: %v", got)
	}
	to6 := netip.MustParseAddrPort("[::1]:8000")
	if got := append(sockowner.ParseListeners(tcp4, to6), sockowner.ParseListeners(tcp6, to6)...); !slices.Equal(got, []sockowner.Listener{{16, 1005}, {18, 1007}}) {
		t.Errorf("to [::1]:8000: %v", got)
	}
	if got := sockowner.ParseListeners("garbage\n 0: zz:1F40 x 0A a b c d e f\n", to4); len(got) != 0 {
		t.Errorf("garbage: %v", got)
	}
}

// listen is a loopback listener of the test's own, with the inode of its
// socket.
func listen(t testing.TB) (net.Listener, uint64) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ln.Close() })
	raw, err := ln.(*net.TCPListener).SyscallConn()
	if err != nil {
		t.Fatal(err)
	}
	var st syscall.Stat_t
	raw.Control(func(fd uintptr) { err = syscall.Fstat(int(fd), &st) })
	if err != nil {
		t.Fatal(err)
	}
	return ln, st.Ino
}

// The user's own listener passes; the same listener said to be another
// user's (an injected owner), or a real one of uid 65534, is refused, and
// names the port and the uid.
func TestCheckLoopback(t *testing.T) {
	ln, ino := listen(t)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := sockowner.CheckLoopback(conn, nil); err != nil {
		t.Errorf("the user's own listener: %v", err)
	}
	asNobody := func(i uint64) (uint32, bool) { return nobody, i == ino }
	var f *sockowner.Foreign
	if err := sockowner.CheckLoopback(conn, asNobody); !errors.As(err, &f) || f.UID != nobody || f.Addr.String() != ln.Addr().String() {
		t.Errorf("injected owner: %v", err)
	}

	t.Run("uid 65534", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("running a listener as uid 65534 needs root (CI runs as root; the injected case runs here)")
		}
		_, addr := testutil.SquatTCP(t, nobody, "127.0.0.1:0")
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		var f *sockowner.Foreign
		if err := sockowner.CheckLoopback(conn, nil); !errors.As(err, &f) || f.UID != nobody {
			t.Errorf("a squatter of uid 65534: %v", err)
		}
	})
}

// A socket file and the process behind it: the user's own pass.
func TestSocketFileAndPeer(t *testing.T) {
	path := filepath.Join(t.TempDir(), "s.sock")
	ln, err := net.Listen("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	isSocket, uid, err := sockowner.SocketFile(path, nil)
	if err != nil || !isSocket || !sockowner.Trusted(uid) {
		t.Errorf("the user's socket: %v %d %v", isSocket, uid, err)
	}
	if isSocket, _, err := sockowner.SocketFile(filepath.Dir(path), nil); err != nil || isSocket {
		t.Errorf("a directory: %v %v", isSocket, err)
	}
	conn, err := net.Dial("unix", path)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	uid, pid, err := sockowner.PeerUID(conn.(*net.UnixConn))
	if err != nil || uid != uint32(os.Getuid()) || pid != int32(os.Getpid()) {
		t.Errorf("peer: uid %d pid %d %v", uid, pid, err)
	}
}

// What the check costs per connection: two reads of /proc (docs: the
// cluster's and State Hub's every dial make it).
func BenchmarkCheckLoopback(b *testing.B) {
	ln, _ := listen(b)
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		b.Fatal(err)
	}
	defer conn.Close()
	for b.Loop() {
		if err := sockowner.CheckLoopback(conn, nil); err != nil {
			b.Fatal(err)
		}
	}
}
