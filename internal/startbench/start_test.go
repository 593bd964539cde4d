package startbench_test

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// rounds is how many times each command starts. The benchmark ignores b.N: one
// round starts every command once, interleaved, so the machine's noise falls
// on all alike, and a hundred rounds give stable medians.
const rounds = 100

// BenchmarkCLIStart starts, side by side in one run, a hello-world Go binary
// (static, like ours), `tmux display -p` on a private server, `linked` (all of
// tamq linked, every package initialised, nothing run: the floor of any
// command), `tamq ping` against a running service, `tamq send` of a small
// message and `tamq --version`, and reports the hello-world's median and
// every other median as a ratio to it. Target (docs/performance.md): tamq
// ping at most 2.2.
func BenchmarkCLIStart(b *testing.B) {
	dir := b.TempDir()
	hello := buildHello(b, dir)
	linked := buildTestdata(b, dir, "linked")

	e := testutil.NewEnv(b)
	e.WriteConfig(b, "[delivery]\nenter_pause_ms = 0\n")
	e.Gita(b, "net-kingdom")
	tm := testutil.NewTmux(b)
	e.Tamq(b, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
	b.Cleanup(func() { e.Run(b, "tamq", "stop") })
	testutil.WaitFor(b, "the recorder of net-kingdom", func() bool { _, ok := e.Recording("net-kingdom"); return ok })

	tamq := filepath.Join(e.Bin, "tamq")
	cmds := []struct {
		name string
		run  func() error
	}{
		{"hello", benchutil.RunQuiet(nil, hello)},
		{"tmux-display", benchutil.RunQuiet(nil, "tmux", "-L", tm.Name, "display", "-p", "#{pid}")},
		{"linked", benchutil.RunQuiet(nil, linked)},
		{"tamq-ping", benchutil.RunQuiet(e.Vars, tamq, "ping", "--quiet")},
		{"tamq-send", benchutil.RunQuiet(e.Vars, tamq, "send", "--quiet", "To:net-kingdom: build is green")},
		{"tamq-version", benchutil.RunQuiet(e.Vars, tamq, "--version")},
	}
	times := make([][]time.Duration, len(cmds))
	b.ResetTimer()
	for range rounds {
		for i, c := range cmds {
			t0 := time.Now()
			if err := c.run(); err != nil {
				b.Fatalf("%s: %v", c.name, err)
			}
			times[i] = append(times[i], time.Since(t0))
		}
	}
	b.StopTimer()
	base := benchutil.Median(times[0])
	b.ReportMetric(float64(base.Microseconds())/1000, "hello-median-ms")
	for i, c := range cmds[1:] {
		m := benchutil.Median(times[i+1])
		b.ReportMetric(float64(m)/float64(base), c.name+"-ratio")
	}
}

// buildHello builds a hello-world Go program, static as the Makefile builds
// ours, in its own module under dir.
func buildHello(b *testing.B, dir string) string {
	b.Helper()
	src := filepath.Join(dir, "hello")
	if err := os.Mkdir(src, 0o755); err != nil {
		b.Fatal(err)
	}
	files := map[string]string{
		"go.mod":  "module hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"os\"\n\nfunc main() { os.Stdout.WriteString(\"hello\\n\") }\n",
	}
	for name, text := range files {
		if err := os.WriteFile(filepath.Join(src, name), []byte(text), 0o644); err != nil {
			b.Fatal(err)
		}
	}
	out := filepath.Join(dir, "hello-bin")
	goBuild(b, src, out, ".")
	return out
}

// buildTestdata builds the program testdata/name, static.
func buildTestdata(b *testing.B, dir, name string) string {
	b.Helper()
	out := filepath.Join(dir, name)
	goBuild(b, ".", out, "./testdata/"+name)
	return out
}

func goBuild(b *testing.B, dir, out, pkg string) {
	b.Helper()
	cmd := exec.Command("go", "build", "-o", out, pkg)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOWORK=off")
	if msg, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build %s: %v\n%s", pkg, err, msg)
	}
}

// Every command of tamq pays every linked package's initialisation, whatever
// it runs. What an initialisation allocates is the same on every run of a build,
// so it can be checked where time cannot: a package that starts building
// tables or compiling patterns at start shows up here. The largest today are
// charmbracelet/ultraviolet (27 KB) and charmbracelet/x/ansi (13 KB); go-runewidth
// v0.0.24 to v0.0.29 built its tables at start and cost every command 30 ms.
const (
	maxInitBytes    = 64 << 10 // any one package
	maxOwnInitBytes = 2 << 10  // one of ours (paths and store, the largest, about 1 KB: built on first use)
	maxAllInitBytes = 512 << 10
)

func TestPackageInitStaysSmall(t *testing.T) {
	e := testutil.NewEnv(t)
	cmd := e.Command(t.Context(), "tamq", "--version")
	cmd.Env = append(cmd.Env, "GODEBUG=inittrace=1")
	r := testutil.RunCmd(t, cmd)
	if r.Status != 0 {
		t.Fatalf("tamq --version: %s", r)
	}
	total, n := 0, 0
	sc := bufio.NewScanner(strings.NewReader(r.Stderr))
	for sc.Scan() {
		pkg, bytes, ok := parseInit(sc.Text())
		if !ok {
			continue
		}
		n++
		total += bytes
		limit := maxInitBytes
		if strings.HasPrefix(pkg, "github.com/tmux-amq/tamq/") {
			limit = maxOwnInitBytes
		}
		if bytes > limit {
			t.Errorf("package %s allocates %d bytes at initialisation (limit %d): every tamq command pays it; build it on first use (sync.OnceValue)", pkg, bytes, limit)
		}
	}
	if n == 0 {
		t.Fatalf("no init trace in tamq's stderr:\n%s", r.Stderr)
	}
	if total > maxAllInitBytes {
		t.Errorf("package initialisation allocates %d bytes in all (limit %d)", total, maxAllInitBytes)
	}
}

// parseInit reads one GODEBUG=inittrace=1 line:
// "init PKG @0.5 ms, 0.01 ms clock, 1088 bytes, 4 allocs".
func parseInit(line string) (pkg string, bytes int, ok bool) {
	f := strings.Fields(line)
	if len(f) < 10 || f[0] != "init" || f[8] != "bytes," {
		return "", 0, false
	}
	n, err := strconv.Atoi(f[7])
	if err != nil {
		return "", 0, false
	}
	return f[1], n, true
}

func TestParseInit(t *testing.T) {
	pkg, n, ok := parseInit("init github.com/tmux-amq/tamq/internal/paths @50 ms, 0.043 ms clock, 1088 bytes, 4 allocs")
	if !ok || pkg != "github.com/tmux-amq/tamq/internal/paths" || n != 1088 {
		t.Fatalf("got %q %d %v", pkg, n, ok)
	}
	if _, _, ok := parseInit("tamq devel go1.26.8"); ok {
		t.Fatal("a line that is not a trace was read as one")
	}
}
