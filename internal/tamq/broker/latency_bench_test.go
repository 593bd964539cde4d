package broker

import (
	"io"
	"os"
	"syscall"
	"testing"
	"time"

	"github.com/creack/pty"

	"github.com/tmux-amq/tamq/internal/benchutil"
)

// echoRoundTrip types one byte into master and waits for the child (cat on a
// raw terminal) to print it back.
func echoRoundTrip(b *testing.B, master *os.File) time.Duration {
	buf := make([]byte, 64)
	t0 := time.Now()
	if _, err := master.Write([]byte{'k'}); err != nil {
		b.Fatal(err)
	}
	for {
		n, err := master.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		for _, c := range buf[:n] {
			if c == 'k' {
				return time.Since(t0)
			}
		}
	}
}

// BenchmarkKeystrokeLatency measures a keystroke's round trip to an echoing
// child through the broker and directly under a PTY, alternately, and reports
// the p99 the broker adds. Target: under 1 ms.
func BenchmarkKeystrokeLatency(b *testing.B) {
	argv := []string{"sh", "-c", "stty raw -echo; printf R; exec cat"}
	// Direct: the child under a PTY of its own.
	cmd := execCommand(argv)
	direct, err := pty.Start(cmd)
	if err != nil {
		b.Fatal(err)
	}
	defer func() { direct.Close(); cmd.Process.Kill(); cmd.Wait() }()
	waitFor(b, direct, 'R')

	// Through the broker, in an outer terminal.
	m, tty, err := pty.Open()
	if err != nil {
		b.Fatal(err)
	}
	defer m.Close()
	r := &Relay{Argv: argv, In: tty, Out: tty}
	done := make(chan struct{})
	go func() { r.Run(); close(done) }()
	waitFor(b, m, 'R')

	var ours, base []time.Duration
	b.ResetTimer()
	for i := 0; i < max(b.N, 200); i++ {
		ours = append(ours, echoRoundTrip(b, m))
		base = append(base, echoRoundTrip(b, direct))
	}
	b.StopTimer()
	p99o, p99b := benchutil.Percentile(ours, 99), benchutil.Percentile(base, 99)
	b.ReportMetric(float64(p99o.Microseconds())/1000, "broker-p99-ms")
	b.ReportMetric(float64(p99b.Microseconds())/1000, "direct-p99-ms")
	b.ReportMetric(float64((p99o-p99b).Microseconds())/1000, "added-p99-ms")
	r.Signal(syscall.SIGKILL)
	<-done
	tty.Close()
}

func waitFor(b *testing.B, r io.Reader, c byte) {
	buf := make([]byte, 64)
	for {
		n, err := r.Read(buf)
		if err != nil {
			b.Fatal(err)
		}
		for _, x := range buf[:n] {
			if x == c {
				return
			}
		}
	}
}
