package main

import (
	"os/exec"
	"strings"
	"testing"
)

func TestParse(t *testing.T) {
	out := `goos: linux
BenchmarkSendEndToEnd-2   	     200	  12.5 tamq-send-median-ms	 6.10 baseline-median-ms	 2.05 ratio	 1234 ns/op
BenchmarkSendEndToEndOther-2 1 9 ratio
PASS`
	m := parse(out, "BenchmarkSendEndToEnd")
	if m["tamq-send-median-ms"] != 12.5 || m["baseline-median-ms"] != 6.1 || m["ratio"] != 2.05 || len(m) != 4 {
		t.Fatalf("parse: %v", m)
	}
	if m := parse("BenchmarkX 1 2 y", "BenchmarkSendEndToEnd"); len(m) != 0 {
		t.Fatalf("another benchmark's line was read: %v", m)
	}
}

func TestTableNamesEveryFigure(t *testing.T) {
	m := map[string]map[string]float64{
		"BenchmarkCLIStart":         {"hello-median-ms": 5, "tamq-ping-ratio": 1.2, "tamq-send-ratio": 1.4},
		"BenchmarkSendEndToEnd":     {"tamq-send-median-ms": 12, "baseline-median-ms": 6, "ratio": 2},
		"BenchmarkBurstDrain":       {"s/100-batched": 0.5, "s/100-one-at-a-time": 20, "speedup": 40},
		"BenchmarkScan8KiBPrompt":   {"ns/op": 90000},
		"BenchmarkGitHubLook/first": {"requests/look": 110, "ns/op": 120e6},
		"BenchmarkGitHubLook/unchanged": {"plain-look-requests": 10, "refresh-look-requests": 120, "counted/look": 0,
			"cpu-ms/look": 2, "cpu-s/hour": 0.48},
		"BenchmarkGitHubLook/baseline-contract-unchanged": {"cpu-ms/look": 0.2},
	}
	none := func(string) (string, error) { return "", exec.ErrNotFound }
	tab := table(m, otherToolRow(none))
	for _, want := range []string{"| `tamq ping` start (median) | 6.00 ms | Go hello-world 5.00 ms | 1.20× | ≤ 2.2× |", "| 0.50 s | one at a time 20.00 s | 0.03× |",
		"| another local agent-messaging tool | none installed (amq looked for) |  | skipped |  |",
		"| secret scan of an 8 KiB prompt | 90.0 µs |  |  |  |",
		"| GitHub Issues: a first look at 10 repos, 1,000 tasks | 110 requests, 120.00 ms |",
		"| 10, 120 requests (0.00 counted); 2.00 ms CPU, 0.48 CPU-s an hour | the contract's unchanged look 0.20 ms CPU | 10.00× | 1 request a repo, none counted |"} {
		if !strings.Contains(tab, want) {
			t.Errorf("table lacks %q:\n%s", want, tab)
		}
	}
}

// The table keeps its row for another tool whether or not one is installed
// where it runs: amq on PATH names it, and nothing else changes.
func TestTableNamesAnInstalledTool(t *testing.T) {
	found := func(name string) (string, error) {
		if name == "amq" {
			return "/usr/local/bin/amq", nil
		}
		return "", exec.ErrNotFound
	}
	m := map[string]map[string]float64{"BenchmarkCLIStart": {"hello-median-ms": 5, "tamq-ping-ratio": 2}}
	tab := table(m, otherToolRow(found))
	want := "| another local tool: amq (agent message queue) | installed at /usr/local/bin/amq |  | not timed: its send needs a setup of its own |  |"
	if !strings.Contains(tab, want) {
		t.Errorf("table lacks %q:\n%s", want, tab)
	}
	if strings.Contains(tab, "none installed") {
		t.Errorf("an installed tool was also reported missing:\n%s", tab)
	}
}
