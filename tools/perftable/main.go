// Command perftable runs the benchmarks behind docs/performance.md's
// side-by-side table, one after another in one run, and prints the table:
// each figure beside its floor measured in the same run, as a ratio, with the
// machine described. `make perf` runs it; the benchmarks' own output goes to
// the log named on stderr.
//
//	go run ./tools/perftable [-o table.md] [-log perf.log]
package main

import (
	"bufio"
	"bytes"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"time"
)

// subBenches are the sub-benchmarks whose figures the table reads, by
// benchmark: each is run in the same process as its baseline.
var subBenches = map[string][]string{
	"BenchmarkGitHubLook": {"first", "unchanged", "baseline-contract-unchanged"},
}

// A benchmark to run: its package, name and how many iterations.
type bench struct {
	pkg, name, benchtime string
}

var benches = []bench{
	{"./internal/startbench", "BenchmarkCLIStart", "1x"},
	{"./internal/tamq/service", "BenchmarkSendEndToEnd", "200x"},
	{"./internal/tamq/service", "BenchmarkEnqueueThroughput", "2000x"},
	{"./internal/tamq/service", "BenchmarkGroupCommit", "4000x"},
	{"./internal/gita", "BenchmarkWatched", "2000x"},
	{"./internal/tamq/service", "BenchmarkEnqueueToPTY", "300x"},
	{"./internal/engine/service", "BenchmarkWakeToFirstByte", "100x"},
	{"./internal/tamq/service", "BenchmarkBurstDrain", "3x"},
	{"./internal/tamq/service", "BenchmarkHistoryPage", "1000x"},
	{"./internal/tamq/service", "BenchmarkExport", "1x"},
	{"./internal/secretscan", "BenchmarkScan8KiBPrompt", "2000x"},
	{"./internal/engine/service", "BenchmarkGitHubLook", "100x"},
}

// otherTools are local agent-messaging tools the table looks for, by
// command name, with a few words on what each is.
var otherTools = []struct{ name, doc string }{
	{"amq", "agent message queue"},
}

func main() {
	out := flag.String("o", "", "also write the table to this file")
	logPath := flag.String("log", filepath.Join(os.TempDir(), "tamq-perf.log"), "where the benchmarks' output goes")
	flag.Parse()
	if err := run(*out, *logPath); err != nil {
		fmt.Fprintln(os.Stderr, "perftable:", err)
		os.Exit(1)
	}
}

func run(out, logPath string) error {
	log, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer log.Close()
	fmt.Fprintf(os.Stderr, "perftable: benchmarks' output in %s\n", logPath)

	// The programs the benchmarks start are built once, as `make test` does.
	bin, err := os.MkdirTemp("", "tamq-perf-bin-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(bin)
	if err := os.Chmod(bin, 0o755); err != nil {
		return err
	}
	build := exec.Command("go", "build", "-o", bin+"/", "./cmd/...", "./internal/testutil/scriptedagent", "./internal/testutil/squatter")
	build.Env = append(os.Environ(), "CGO_ENABLED=0")
	if msg, err := build.CombinedOutput(); err != nil {
		return fmt.Errorf("go build: %v\n%s", err, msg)
	}

	metrics := map[string]map[string]float64{}
	start := time.Now()
	for _, b := range benches {
		fmt.Fprintf(os.Stderr, "perftable: %s (%s)\n", b.name, b.benchtime)
		cmd := exec.Command("go", "test", "-count=1", "-timeout=30m", "-run=^$", "-bench=^"+b.name+"$", "-benchtime="+b.benchtime, b.pkg)
		cmd.Env = append(os.Environ(), "TAMQ_TEST_BIN="+bin)
		var buf bytes.Buffer
		cmd.Stdout, cmd.Stderr = io.MultiWriter(&buf, log), log
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("%s: %v (see %s)", b.name, err, logPath)
		}
		m := parse(buf.String(), b.name)
		for _, sub := range subBenches[b.name] {
			// A sub-benchmark's figures go under its whole name.
			sm := parse(buf.String(), b.name+"/"+sub)
			metrics[b.name+"/"+sub] = sm
			if len(m) == 0 {
				m = sm
			}
		}
		if len(m) == 0 {
			return fmt.Errorf("%s reported nothing (see %s)", b.name, logPath)
		}
		metrics[b.name] = m
	}

	var t strings.Builder
	fmt.Fprintf(&t, "Measured %s in %s by `make perf` (tools/perftable).\n\n", time.Now().UTC().Format("2006-01-02"), time.Since(start).Round(time.Second))
	fmt.Fprintf(&t, "Machine: %s.\n\n", machine())
	t.WriteString(table(metrics, otherToolRow(exec.LookPath)))
	fmt.Print(t.String())
	if out != "" {
		return os.WriteFile(out, []byte(t.String()), 0o644)
	}
	return nil
}

// parse reads the metrics of name's result line: "BenchmarkX-2  N  v unit  v unit ...".
func parse(output, name string) map[string]float64 {
	m := map[string]float64{}
	sc := bufio.NewScanner(strings.NewReader(output))
	for sc.Scan() {
		f := strings.Fields(sc.Text())
		if len(f) < 2 || f[0] != name && !strings.HasPrefix(f[0], name+"-") {
			continue
		}
		for i := 2; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				m[f[i+1]] = v
			}
		}
	}
	return m
}

// row is one line of the table.
type row struct {
	what, ours, floor, ratio, target string
}

// table lays out the figures; otherTool is otherToolRow's row, passed in so
// that what is installed on the machine does not change what the table's
// test sees.
func table(m map[string]map[string]float64, otherTool row) string {
	get := func(b, k string) float64 { return m[b][k] }
	ms := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + " ms" }
	x := func(v float64) string { return strconv.FormatFloat(v, 'f', 2, 64) + "×" }
	start := "BenchmarkCLIStart"
	hello := get(start, "hello-median-ms")
	rows := []row{
		{"`tamq ping` start (median)", ms(hello * get(start, "tamq-ping-ratio")), "Go hello-world " + ms(hello), x(get(start, "tamq-ping-ratio")), "≤ 2.2×"},
		{"`tamq send` start (median)", ms(hello * get(start, "tamq-send-ratio")), "Go hello-world " + ms(hello), x(get(start, "tamq-send-ratio")), ""},
		{"any command's floor (all of tamq linked and initialised, nothing run)", ms(hello * get(start, "linked-ratio")), "Go hello-world", x(get(start, "linked-ratio")), ""},
		{"`tamq --version`", ms(hello * get(start, "tamq-version-ratio")), "Go hello-world", x(get(start, "tamq-version-ratio")), ""},
		{"`tmux display -p` (for scale)", ms(hello * get(start, "tmux-display-ratio")), "Go hello-world", x(get(start, "tmux-display-ratio")), ""},
	}
	send := "BenchmarkSendEndToEnd"
	rows = append(rows, row{"`tamq send` into a window, durable (median)", ms(get(send, "tamq-send-median-ms")), "`tmux send-keys -l` " + ms(get(send, "baseline-median-ms")), x(get(send, "ratio")), "≤ 2.5×"})
	rows = append(rows, otherTool)
	enq := "BenchmarkEnqueueThroughput"
	rows = append(rows,
		row{"durable enqueue, 8 clients", fmt.Sprintf("%.0f msgs/s", get(enq, "msgs/s")), fmt.Sprintf("one commit per row %.0f rows/s", get(enq, "baseline-inserts/s")), x(get(enq, "ratio")), "≥ 1×"},
		row{"enqueue latency at half that load (p99)", ms(get(enq, "p99-ms-at-half-load")), "", "", "≤ 5 ms"},
	)
	gc := "BenchmarkGroupCommit"
	rows = append(rows,
		row{"group commit, 8 clients in the service's process", fmt.Sprintf("%.0f msgs/s", get(gc, "msgs/s")), fmt.Sprintf("the same rows, a commit each %.0f rows/s", get(gc, "floor-rows/s")), x(get(gc, "ratio-vs-floor")), "≥ 3×"},
		row{"group commit latency at half that load (p99)", ms(get(gc, "p99-ms")), "a lone one-row commit (p99) " + ms(get(gc, "floor-p99-ms")), x(get(gc, "p99-ratio-vs-floor")), "≤ 5 ms"},
	)
	w := "BenchmarkWatched"
	rows = append(rows, row{"gita registry as a send reads it (20 repos)", fmt.Sprintf("%.1f µs", get(w, "watched-ns/op")/1000), fmt.Sprintf("a full read %.1f µs", get(w, "load-ns/op")/1000), x(get(w, "ratio-to-load")), ""})
	pty := "BenchmarkEnqueueToPTY"
	rows = append(rows, row{"enqueue → first byte in the agent's PTY (p50, p99)", ms(get(pty, "p50-ms")) + ", " + ms(get(pty, "p99-ms")), "the enqueue alone (p50) " + ms(get(pty, "enqueue-p50-ms")), x(get(pty, "p50-ratio-to-enqueue")), "p99 ≤ 10 ms"})
	wake := "BenchmarkWakeToFirstByte"
	rows = append(rows, row{"engine wake → first byte (p50, p99)", ms(get(wake, "wake-p50-ms")) + ", " + ms(get(wake, "wake-p99-ms")), "a plain send's first byte (p50) " + ms(get(wake, "send-p50-ms")), x(get(wake, "wake/send-p50")), ""})
	burst := "BenchmarkBurstDrain"
	if sp := get(burst, "speedup"); sp > 0 {
		rows = append(rows, row{"100 queued messages drained into one window", fmt.Sprintf("%.2f s", get(burst, "s/100-batched")), fmt.Sprintf("one at a time %.2f s", get(burst, "s/100-one-at-a-time")), x(1 / sp), "< 5 s"})
	}
	hist := "BenchmarkHistoryPage"
	rows = append(rows, row{"history page of 50 over a million messages (p99)", ms(get(hist, "p99-ms")), "the same 50 rows by primary key", x(get(hist, "p99-ratio-to-pk-fetch")), "≤ 10 ms"})
	exp := "BenchmarkExport"
	rows = append(rows, row{"JSONL export of a million messages", fmt.Sprintf("%.0f lines/s", get(exp, "lines/s")), "a bare scan of the rows", x(get(exp, "ratio-to-row-scan")), ""})
	scan := "BenchmarkScan8KiBPrompt"
	us := func(ns float64) string { return strconv.FormatFloat(ns/1000, 'f', 1, 64) + " µs" }
	rows = append(rows, row{"secret scan of an 8 KiB prompt", us(get(scan, "ns/op")), "", "", ""})
	first, still, contract := "BenchmarkGitHubLook/first", "BenchmarkGitHubLook/unchanged", "BenchmarkGitHubLook/baseline-contract-unchanged"
	if get(still, "cpu-ms/look") > 0 && get(contract, "cpu-ms/look") > 0 {
		rows = append(rows,
			row{"GitHub Issues: a first look at 10 repos, 1,000 tasks", fmt.Sprintf("%.0f requests, %s", get(first, "requests/look"), ms(get(first, "ns/op")/1e6)), "", "", ""},
			row{"GitHub Issues: a look when nothing changed (requests: plain look, refresh look)",
				fmt.Sprintf("%.0f, %.0f requests (%.2f counted); %s CPU, %.2f CPU-s an hour", get(still, "plain-look-requests"), get(still, "refresh-look-requests"),
					get(still, "counted/look"), ms(get(still, "cpu-ms/look")), get(still, "cpu-s/hour")),
				"the contract's unchanged look " + ms(get(contract, "cpu-ms/look")) + " CPU", x(get(still, "cpu-ms/look") / get(contract, "cpu-ms/look")), "1 request a repo, none counted"},
		)
	}

	var b strings.Builder
	b.WriteString("| what | ours | floor, same run | ratio | target |\n| --- | --- | --- | --- | --- |\n")
	for _, r := range rows {
		fmt.Fprintf(&b, "| %s | %s | %s | %s | %s |\n", r.what, r.ours, r.floor, r.ratio, r.target)
	}
	return b.String()
}

// otherToolRow says whether another local agent-messaging tool is installed
// (lookPath is exec.LookPath). None has a send command the table could time
// the same way without knowing its setup, so when one is found the row names
// it and asks for a manual run.
func otherToolRow(lookPath func(string) (string, error)) row {
	for _, t := range otherTools {
		if p, err := lookPath(t.name); err == nil {
			return row{"another local tool: " + t.name + " (" + t.doc + ")", "installed at " + p, "", "not timed: its send needs a setup of its own", ""}
		}
	}
	names := make([]string, len(otherTools))
	for i, t := range otherTools {
		names[i] = t.name
	}
	return row{"another local agent-messaging tool", "none installed (" + strings.Join(names, ", ") + " looked for)", "", "skipped", ""}
}

// machine describes where the figures come from.
func machine() string {
	cpu := "unknown CPU"
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for line := range strings.SplitSeq(string(b), "\n") {
			if k, v, ok := strings.Cut(line, ":"); ok && strings.TrimSpace(k) == "model name" {
				cpu = strings.TrimSpace(v)
				break
			}
		}
	}
	mem := ""
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		f := strings.Fields(string(b))
		if len(f) > 1 {
			if kb, err := strconv.Atoi(f[1]); err == nil {
				mem = fmt.Sprintf(", %.0f GiB memory", float64(kb)/(1<<20))
			}
		}
	}
	kernel, _ := os.ReadFile("/proc/sys/kernel/osrelease")
	tmux, _ := exec.Command("tmux", "-V").Output()
	fs, _ := exec.Command("df", "--output=fstype", os.TempDir()).Output()
	fsType := strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(string(fs)), "Type"))
	return fmt.Sprintf("%d CPUs (%s)%s, Linux %s, %s, %s, temporary files on %s", runtime.NumCPU(), cpu, mem,
		strings.TrimSpace(string(kernel)), runtime.Version(), strings.TrimSpace(string(tmux)), fsType)
}
