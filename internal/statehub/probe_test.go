package statehub

import (
	"context"
	"encoding/binary"
	"fmt"
	"net"
	"net/http"
	"net/http/httptest"
	"net/netip"
	"slices"
	"testing"
	"time"
)

func TestProbe(t *testing.T) {
	t.Parallel()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusUnauthorized) // any answer means reachable
	}))
	defer srv.Close()
	if err := Probe(context.Background(), srv.URL, time.Second); err != nil {
		t.Errorf("reachable hub: %v", err)
	}
	// A port nobody listens on.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	if err := Probe(context.Background(), "http://"+addr, time.Second); err == nil {
		t.Error("closed port reported reachable")
	}
}

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
	if got := append(parseListeners(tcp4, to4), parseListeners(tcp6, to4)...); !slices.Equal(got, []tcpListener{{11, 1000}, {12, 1001}, {16, 1005}, {17, 1006}}) {
		t.Errorf("to 127.0.0.1:8000: %v", got)
	}
	to6 := netip.MustParseAddrPort("[::1]:8000")
	if got := append(parseListeners(tcp4, to6), parseListeners(tcp6, to6)...); !slices.Equal(got, []tcpListener{{16, 1005}, {18, 1007}}) {
		t.Errorf("to [::1]:8000: %v", got)
	}
	if got := parseListeners("garbage\n 0: zz:1F40 x 0A a b c d e f\n", to4); len(got) != 0 {
		t.Errorf("garbage: %v", got)
	}
}
