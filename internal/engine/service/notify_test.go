package service_test

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Issue 40 item 14: [notify] runs its command when a task starts needing a
// person (here a human gate in State Hub) and once more when it stops, with
// the notice in its environment and on stdin; a look that changes nothing,
// and a restart of the engine, run it no more.
func TestNotifyCommandRunsWhenATaskNeedsYouAndWhenResolved(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	dir := t.TempDir()
	out := filepath.Join(dir, "notices")
	sh := filepath.Join(dir, "notify.sh")
	if err := os.WriteFile(sh, []byte("#!/bin/sh\n{ env | grep '^TAMQ_NOTIFY_' | sort; cat; echo ---; } >> \"$1\"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	cfg := enginetest.HubConfig(h, 1, "") + fmt.Sprintf("\n[notify]\ncommand = [%q, %q]\ntimeout_seconds = 5\n", sh, out)
	l := newLoop(t, cfg, "net-kingdom")
	notices := func() []string {
		b, _ := os.ReadFile(out)
		return strings.Split(strings.TrimSuffix(string(b), "---\n"), "---\n")
	}
	read := func() string { b, _ := os.ReadFile(out); return string(b) }

	g := enginetest.Todo("G", "net-kingdom")
	g.NeedsHuman = true
	h.Put(enginetest.Workplan("W", "net-kingdom", g))
	// A notice is whole once the script wrote its "---" (it writes the
	// environment first, then its stdin), and told once the engine logged it.
	whole := func(n int) bool {
		return strings.Count(read(), "---\n") == n && strings.Count(l.EngineLog("notified"), "notified") == n
	}
	testutil.WaitFor(t, "the needs_you notice", func() bool { return whole(1) })
	first := notices()[0]
	for _, want := range []string{"TAMQ_NOTIFY_TASK=G\n", "TAMQ_NOTIFY_REPO=net-kingdom\n", "TAMQ_NOTIFY_REASON=gate_human\n",
		"TAMQ_NOTIFY_ACTION=decide the gate in State Hub", `{"event":"needs_you","task":"G","repo":"net-kingdom","reason":"gate_human","action":`} {
		if !strings.Contains(first, want) {
			t.Errorf("the notice does not hold %q:\n%s", want, first)
		}
	}

	// Later looks, and a restart, see the same standing: no second notice.
	polls := l.Status(t).StateHub.Polls
	testutil.WaitFor(t, "two more looks", func() bool { return l.Status(t).StateHub.Polls >= polls+2 })
	l.Env.Run(t, "coordination-engine", "stop")
	l.Env.Engine(t, "start", "--detach")
	testutil.WaitFor(t, "two looks after the restart", func() bool { return l.Status(t).StateHub.Polls >= 2 })
	if n := len(notices()); n != 1 {
		t.Fatalf("%d notices for one standing:\n%s", n, read())
	}

	h.Patch("G", map[string]any{"needs_human": false})
	testutil.WaitFor(t, "the resolved notice", func() bool { return whole(2) })
	ns := notices()
	if len(ns) != 2 || !strings.Contains(ns[1], "TAMQ_NOTIFY_TASK=G\n") || !strings.Contains(ns[1], `"event":"resolved"`) {
		t.Errorf("notices:\n%s", read())
	}
	if log := l.EngineLog("notified"); strings.Count(log, "notified") != 2 {
		t.Errorf("the engine's log of notices:\n%s", log)
	}
}
