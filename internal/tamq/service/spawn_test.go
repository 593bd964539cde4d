package service_test

import (
	"bytes"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// The tmux processes an idle workspace and a delivery cost, which must not
// grow with windows or tmux servers (docs/performance.md, "Scale"): once a
// window's broker is attached, an operator's send and its delivery spawn no
// tmux process; a window opened on one tmux server makes the service ask
// that server alone. Counted through a tmux on the service's PATH that logs
// each call. That the watcher leaves the server of brokered windows alone
// for longer than its plain listing interval is
// TestTheWatcherListsABrokeredServerLessOften, on a stepped clock.
func TestIdleAndDeliveryStartNoTmux(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, fastConfig)
	shim := filepath.Join(e.Root, "shim")
	if err := os.Mkdir(shim, 0o755); err != nil {
		t.Fatal(err)
	}
	log := filepath.Join(e.Root, "tmux-calls")
	real, err := exec.LookPath("tmux")
	if err != nil {
		t.Fatal(err)
	}
	script := "#!/bin/sh\necho \"$*\" | cut -c 1-100 >> " + log + "\nexec " + real + " \"$@\"\n"
	if err := os.WriteFile(filepath.Join(shim, "tmux"), []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, v := range e.Vars {
		if p, ok := strings.CutPrefix(v, "PATH="); ok {
			e.Vars[i] = "PATH=" + shim + ":" + p
		}
	}
	calls := func() string { b, _ := os.ReadFile(log); return string(b) }
	e.Gita(t, "net-kingdom")
	// A second tmux server with a window: an operator's send must not make
	// the service list it either.
	tms := []*testutil.Tmux{testutil.NewTmux(t), testutil.NewTmux(t)}
	t.Cleanup(func() { e.Run(t, "tamq", "stop") })
	e.Gita(t, "railiance")
	e.Tamq(t, "open", "--tmux-socket", tms[0].Name, "--command", e.RecorderCommand(), "net-kingdom")
	e.Tamq(t, "open", "--tmux-socket", tms[1].Name, "--command", e.RecorderCommand(), "railiance")
	testutil.WaitFor(t, "both brokers", func() bool { return brokersAttached(t, e) == 2 })
	before := calls()
	send(t, e, "To:net-kingdom: no tmux for this")
	waitRecorded(t, e, "net-kingdom", "\r")
	if got := strings.TrimPrefix(calls(), before); got != "" {
		t.Errorf("tmux calls by the service for one send and its delivery (%d):\n%s", bytes.Count([]byte(got), []byte("\n")), got)
	}
	// A window opened on the second server is looked up there alone.
	before = calls()
	e.Gita(t, "third")
	e.Tamq(t, "open", "--tmux-socket", tms[1].Name, "--command", e.RecorderCommand(), "third")
	testutil.WaitFor(t, "the recorder of third", func() bool { _, ok := e.Recording("third"); return ok })
	send(t, e, "To:third: hello")
	waitRecorded(t, e, "third", "\r")
	for _, line := range strings.Split(strings.TrimPrefix(calls(), before), "\n") {
		if strings.Contains(line, tms[0].Name) {
			t.Errorf("opening a window on another server asked the first one: %s", line)
		}
	}
}
