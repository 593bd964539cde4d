package broker

import (
	"bytes"
	"fmt"
	"io"
	"os"
	"testing"
	"time"
)

// agentOutput is what an agent's terminal shows: styled lines of text, a
// To: block now and then, cursor moves and erased lines.
func agentOutput(size int) []byte {
	var b bytes.Buffer
	for i := 0; b.Len() < size; i++ {
		if i%50 == 0 {
			fmt.Fprintf(&b, "To:net: block %d\r\nwith a second line\r\n\r\n", i)
			continue
		}
		fmt.Fprintf(&b, "\x1b[1m%5d\x1b[0m a line of output with ünïcödé ✓ and \x1b[38;5;42mcolour\x1b[0m\r\n", i)
		if i%10 == 0 {
			b.WriteString("\x1b[2K\x1b[1A\x1b[1B")
		}
	}
	return b.Bytes()[:size]
}

// BenchmarkRelayThroughputWithModel runs 64 MB of agent output through the
// relay bare and through the relay feeding the model (as `tamq broker` runs
// it), alternately, and reports the ratio of their throughputs. Target: at
// least 0.9: the operator's screen never waits on the model.
func BenchmarkRelayThroughputWithModel(b *testing.B) {
	const size = 64 << 20
	file := b.TempDir() + "/out"
	if err := writeFile(file, agentOutput(size)); err != nil {
		b.Fatal(err)
	}
	argv := []string{"cat", file}
	var bare, modelled time.Duration
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		if _, err := (&Relay{Argv: argv, Out: io.Discard}).Run(); err != nil {
			b.Fatal(err)
		}
		bare += time.Since(t0)

		obs := &Observer{Slugs: func() []string { return slugs }, Emit: func(Block) {}}
		m := NewModel(120, 40, obs)
		t0 = time.Now()
		if _, err := (&Relay{Argv: argv, Out: io.Discard, Observe: m}).Run(); err != nil {
			b.Fatal(err)
		}
		modelled += time.Since(t0)
		m.Close()
	}
	b.ReportMetric(float64(size)*float64(b.N)/bare.Seconds()/1e6, "bare-MB/s")
	b.ReportMetric(float64(size)*float64(b.N)/modelled.Seconds()/1e6, "with-model-MB/s")
	b.ReportMetric(bare.Seconds()/modelled.Seconds(), "ratio")
}

// BenchmarkObserverAndScreen measures how fast the observer and the screen
// (the emulator) take agent output, each as a ratio to copying the same
// bytes in the same run.
func BenchmarkObserverAndScreen(b *testing.B) {
	out := agentOutput(4 << 20)
	var copied, observed, screened time.Duration
	var sink bytes.Buffer
	for i := 0; i < b.N; i++ {
		t0 := time.Now()
		sink.Reset()
		sink.Write(out)
		copied += time.Since(t0)

		obs := &Observer{Slugs: func() []string { return slugs }, Emit: func(Block) {}}
		t0 = time.Now()
		for _, c := range chunks(out, 32<<10) {
			obs.Write(c)
		}
		observed += time.Since(t0)

		m := NewModel(120, 40, nil)
		t0 = time.Now()
		for _, c := range chunks(out, 32<<10) {
			m.apply(c)
		}
		screened += time.Since(t0)
		m.Close()
	}
	mb := float64(len(out)*b.N) / 1e6
	b.ReportMetric(mb/copied.Seconds(), "copy-MB/s")
	b.ReportMetric(mb/observed.Seconds(), "observer-MB/s")
	b.ReportMetric(mb/screened.Seconds(), "screen-MB/s")
	b.ReportMetric(copied.Seconds()/observed.Seconds(), "observer/copy")
	b.ReportMetric(copied.Seconds()/screened.Seconds(), "screen/copy")
}

func writeFile(path string, b []byte) error { return os.WriteFile(path, b, 0o600) }

// chunks cuts b into reads of n bytes, as a PTY hands output over.
func chunks(b []byte, n int) [][]byte {
	var out [][]byte
	for len(b) > n {
		out = append(out, b[:n])
		b = b[n:]
	}
	return append(out, b)
}
