package notify

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
)

// script writes a shell script into dir and returns its path.
func script(t *testing.T, body string) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), "notify.sh")
	if err := os.WriteFile(p, []byte("#!/bin/sh\n"+body), 0o755); err != nil {
		t.Fatal(err)
	}
	return p
}

// The command gets the notice in its environment and as JSON on stdin,
// with no shell between: an argument with blanks and $ stays one argument.
func TestRunnerPassesTheNotice(t *testing.T) {
	out := filepath.Join(t.TempDir(), "out")
	sh := script(t, `env | grep '^TAMQ_NOTIFY_' | sort > "$1"; echo "arg2=$2" >> "$1"; cat >> "$1"`)
	r := Runner{Command: []string{sh, out, "a b $HOME"}, Timeout: time.Minute, Clock: clock.System, Env: []string{"PATH=/usr/bin:/bin"}}
	n := Notice{Event: NeedsYou, Task: "A", Repo: "net-kingdom", Reason: "gate_human", Action: Action(NeedsYou, "A", "net-kingdom", "gate_human")}
	if res := r.Run(context.Background(), n); !res.OK() {
		t.Fatalf("run: %v %+v", res, res)
	}
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.SplitN(string(b), "\n", 7)
	want := []string{"TAMQ_NOTIFY_ACTION=" + n.Action, "TAMQ_NOTIFY_EVENT=needs_you", "TAMQ_NOTIFY_REASON=gate_human",
		"TAMQ_NOTIFY_REPO=net-kingdom", "TAMQ_NOTIFY_TASK=A", "arg2=a b $HOME"}
	for i, w := range want {
		if lines[i] != w {
			t.Errorf("line %d: %q, want %q", i+1, lines[i], w)
		}
	}
	var got Notice
	if err := json.Unmarshal([]byte(lines[6]), &got); err != nil || got != n {
		t.Errorf("stdin %q: %+v (%v)", lines[6], got, err)
	}
}

// A failing command is reported by its exit status, with a short escaped
// excerpt of what it wrote and never more.
func TestRunnerReportsFailure(t *testing.T) {
	sh := script(t, `printf 'bad\033[31m token\n'; head -c 5000 /dev/zero | tr '\0' x; exit 3`)
	res := Runner{Command: []string{sh}, Timeout: time.Minute, Clock: clock.System}.Run(context.Background(), Notice{Event: Resolved, Task: "A"})
	if res.OK() || res.Exit != 3 || res.TimedOut || res.Err != nil || res.String() != "exit status 3" {
		t.Errorf("result %+v", res)
	}
	if !strings.HasPrefix(res.Excerpt, `bad\x1b[31m token\x0a`) || len(res.Excerpt) > 2*excerptMax+20 {
		t.Errorf("excerpt %q (%d bytes)", res.Excerpt, len(res.Excerpt))
	}
	res = Runner{Command: []string{"/nonexistent/notify"}, Timeout: time.Minute, Clock: clock.System}.Run(context.Background(), Notice{})
	if res.OK() || res.Err == nil {
		t.Errorf("a missing program: %+v", res)
	}
}

// At the timeout the command's whole process group is killed: the run
// returns although a child it started would sleep for good.
func TestRunnerKillsTheGroupAtTheTimeout(t *testing.T) {
	sh := script(t, "sleep 1000 &\nwait\n")
	clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	done := make(chan Result, 1)
	go func() {
		done <- Runner{Command: []string{sh}, Timeout: 10 * time.Second, Clock: clk}.Run(context.Background(), Notice{Event: NeedsYou, Task: "A"})
	}()
	clk.BlockUntil(1, nil)
	clk.Advance(10 * time.Second)
	res := <-done
	if !res.TimedOut || res.OK() || res.String() != "killed at the timeout" {
		t.Errorf("result %+v", res)
	}
}
