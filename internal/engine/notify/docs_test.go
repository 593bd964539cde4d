package notify

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
)

// The three recipes of docs/notify.md run as written: each script, run by
// the Runner with stand-ins for notify-send, ntfy and curl on PATH, calls
// its program with the notice.
func TestNotifyDocRecipesRun(t *testing.T) {
	b, err := os.ReadFile("../../../docs/notify.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile("(?s)```sh\n(.*?)```").FindAllStringSubmatch(string(b), -1)
	if len(blocks) != 3 {
		t.Fatalf("%d sh blocks in docs/notify.md, want 3", len(blocks))
	}
	bin := t.TempDir()
	log := filepath.Join(t.TempDir(), "calls")
	stub := "#!/bin/sh\n{ echo \"$(basename \"$0\")\"; for a in \"$@\"; do echo \"[$a]\"; done; [ \"$(basename \"$0\")\" = curl ] && cat; echo; } >> " + log + "\n"
	for _, p := range []string{"notify-send", "ntfy", "curl"} {
		if err := os.WriteFile(filepath.Join(bin, p), []byte(stub), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	n := Notice{Event: NeedsYou, Task: "T-42", Repo: "net-kingdom", Reason: "gate_human", Action: Action(NeedsYou, "T-42", "net-kingdom", "gate_human")}
	wants := [][]string{
		{"notify-send", "[--urgency=critical]", "[Task T-42 needs you (gate_human)]", "[net-kingdom: decide the gate in State Hub"},
		{"ntfy", "[publish]", "[Task T-42 needs you]", "[--priority]", "[high]", "[my-tamq-topic]", "[net-kingdom (gate_human): decide the gate"},
		{"curl", "[--data-binary]", "[@-]", "[https://hooks.example.com/tamq]", `{"event":"needs_you","task":"T-42","repo":"net-kingdom","reason":"gate_human"`},
	}
	args := [][]string{nil, {"my-tamq-topic"}, {"https://hooks.example.com/tamq"}}
	for i, blk := range blocks {
		os.Remove(log)
		sh := filepath.Join(t.TempDir(), "recipe")
		if err := os.WriteFile(sh, []byte(blk[1]), 0o755); err != nil {
			t.Fatal(err)
		}
		r := Runner{Command: append([]string{sh}, args[i]...), Timeout: time.Minute, Clock: clock.System, Env: []string{"PATH=" + bin + ":/usr/bin:/bin"}}
		if res := r.Run(context.Background(), n); !res.OK() {
			t.Fatalf("recipe %d: %v: %s", i+1, res, res.Excerpt)
		}
		got, _ := os.ReadFile(log)
		for _, w := range wants[i] {
			if !strings.Contains(string(got), w) {
				t.Errorf("recipe %d: the call does not hold %q:\n%s", i+1, w, got)
			}
		}
		// The resolved notice runs too.
		if res := r.Run(context.Background(), Notice{Event: Resolved, Task: "T-42", Repo: "net-kingdom", Reason: "gate_human"}); !res.OK() {
			t.Errorf("recipe %d, resolved: %v: %s", i+1, res, res.Excerpt)
		}
	}
}
