package service_test

import (
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The disk holding the state directory fills up under load (8 senders, two
// windows): sends are refused with storage_error saying the disk is full,
// the service keeps running and logs the spell, not every failure; when
// space returns sends are accepted again, every message accepted before,
// during and after is delivered once, and the database passes the
// integrity check.
func TestChaosDiskFull(t *testing.T) {
	t.Parallel()
	repos := []string{"alpha", "beta"}
	e, tm := emptyWorkspace(t, "[delivery]\nenter_pause_ms = 0\n", repos...)
	disk := e.SmallDisk(t, e.TamqState())
	e.Tamq(t, append([]string{"open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand()}, repos...)...)
	for _, r := range repos {
		testutil.WaitFor(t, "the recorder of "+r, func() bool { _, ok := e.Recording(r); return ok })
	}
	ld := startLoad(t, e, repos...)
	testutil.WaitFor(t, "some load", func() bool { return ld.count() >= 40 })
	pid := pingPID(t, e)
	logFrom := fileSize(e.TamqState() + "/tamq.log")

	filled := time.Now()
	before := ld.count()
	disk.Fill(t, pid)
	testutil.WaitFor(t, "a send refused", func() bool { return ld.refused.Load() > 0 })
	firstRefusal := time.Since(filled)
	beforeFull := ld.count() - before

	// What a user sees: `tamq send` exits with storage_error's status and
	// says the disk is full. While full, a send may still fit now and then
	// (SQLite reuses its WAL after a checkpoint); one that is accepted must
	// be delivered like any other.
	probe := 0
	sendProbe := func() testutil.Result {
		probe++
		body := fmt.Sprintf("probe-%03d", probe)
		r := e.Run(t, "tamq", "send", "To:alpha: "+body)
		if r.Status == 0 {
			ld.accepted.Store(body, "alpha")
		}
		return r
	}
	var refused testutil.Result
	testutil.WaitFor(t, "tamq send to fail", func() bool { refused = sendProbe(); return refused.Status != 0 })
	if refused.Status != errs.ExitStatus(errs.Storage) || !strings.HasPrefix(refused.Stderr, "tamq: "+disk.Says()) {
		t.Errorf("tamq send on a full disk: %s\nwant exit %d and %q first", refused, errs.ExitStatus(errs.Storage), disk.Says())
	}
	if strings.Contains(refused.Stderr, "probe-") {
		t.Errorf("the error quotes the message: %s", refused.Stderr)
	}
	// The service stays up through a spell of refusals.
	testutil.WaitFor(t, "many refusals", func() bool { return ld.refused.Load() >= 300 })
	if got := pingPID(t, e); got != pid {
		t.Fatalf("the service was replaced while the disk was full (pid %d, was %d)", got, pid)
	}
	refusedWhileFull := ld.refused.Load()

	disk.Free(t)
	freed := time.Now()
	var last testutil.Result
	deadline := time.Now().Add(20 * time.Second)
	for last = sendProbe(); last.Status != 0; last = sendProbe() {
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(e.TamqState() + "/tamq.log")
			t.Fatalf("no send accepted after space returned: %s\nlog:\n%s", last, b)
		}
	}
	recovered := time.Since(freed)
	n := ld.count()
	testutil.WaitFor(t, "load after recovery", func() bool { return ld.count() >= n+40 })

	total, doubled := ld.check(t, e)
	if doubled > 0 {
		t.Errorf("%d deliveries doubled across a full disk", doubled)
	}
	testutil.IntegrityCheck(t, e.Database())
	if got := pingPID(t, e); got != pid {
		t.Errorf("the service was replaced (pid %d, was %d)", got, pid)
	}
	// The log says a spell began and ended, not each refusal.
	logged := testutil.ReadFrom(t, e.TamqState()+"/tamq.log", logFrom)
	lines := strings.Count(logged, "\n")
	if lines > 40 {
		t.Errorf("%d log lines for %d refusals while the disk was full:\n%s", lines, refusedWhileFull, logged)
	}
	if strings.Contains(logged, "chaos s") || strings.Contains(logged, "probe-") {
		t.Errorf("the log quotes a message:\n%s", logged)
	}
	t.Logf("disk full (%s): %d sends accepted after the fill until the first refusal %s later; "+
		"%d refused while full; error: %q; sends accepted again %s after space returned; "+
		"%d messages accepted, all delivered once; %d log lines; integrity_check ok",
		disk.Method, beforeFull, firstRefusal.Round(time.Millisecond), refusedWhileFull,
		strings.TrimSpace(refused.Stderr), recovered.Round(time.Millisecond), total, lines)
}
