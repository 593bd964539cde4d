package service_test

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// Waiting is not failing (issue 39): a wake tamq holds unwritten never
// reached the agent, so it spends no attempt and grows no budget; it shows
// as needing a person, and goes in once the person has dealt with it.

// A wake held behind a permission dialog waits through many ack deadlines
// at attempt 1 (on main it ran out twice and ended "retries exhausted"),
// `tasks` and status count it as needing a person at that dialog, and it
// goes in when the dialog closes.
func TestAWakeHeldByADialogWaitsAndGoesInWhenItCloses(t *testing.T) {
	t.Parallel()
	l, dialog := heldWakeLoop(t, "SCRIPTED_AGENT_DIALOG")

	var s api.TaskStanding
	testutil.WaitFor(t, "T-1 held at its dialog", func() bool { s = l.standing(t, "T-1"); return s.Dialog != "" })
	if s.Kind != "needs_you" || s.Dialog != "alpha" || s.Wait != "dialog" ||
		s.Words != "needs you: dialog open in window alpha (lease "+s.LeaseID+": its wake (attempt 1) waits, no attempt used)" {
		t.Errorf("T-1 at its dialog: %+v", s)
	}
	id := s.LeaseID
	first := l.heldThreeDeadlines(t, id)
	if n := l.Status(t).Tasks["needs_you"]; n != 1 {
		t.Errorf("status counts %d tasks needing a person, want 1", n)
	}
	if out := l.Env.Engine(t, "tasks", "--needs-you").Stdout; !strings.Contains(out, "T-1") || !strings.Contains(out, "dialog open in window alpha") {
		t.Errorf("tasks --needs-you:\n%s", out)
	}

	l.completesOnItsFirstAttempt(t, dialog, first)
}

// A wake queued while the agent is at work for a person (busy, not at its
// prompt) waits through many ack deadlines at attempt 1, as working, not as
// needing a person, and goes in once the agent is back at its prompt. Once,
// it ran out at each deadline as if the agent had ignored it, and a person
// who kept the agent busy for ten minutes found the task "retries
// exhausted".
func TestAWakeQueuedForABusyAgentWaitsForItsPrompt(t *testing.T) {
	t.Parallel()
	l, busy := heldWakeLoop(t, "SCRIPTED_AGENT_BUSY")

	var s api.TaskStanding
	testutil.WaitFor(t, "T-1's wake held for the busy agent", func() bool { s = l.standing(t, "T-1"); return s.Wait == "window_busy" })
	if s.Kind != "working" || !strings.Contains(s.Words, "its wake waits: the agent in the window of alpha is busy (not at its prompt), no attempt used") {
		t.Errorf("T-1 for a busy agent: %+v", s)
	}
	first := l.heldThreeDeadlines(t, s.LeaseID)
	if n := l.Status(t).Tasks["needs_you"]; n != 0 {
		t.Errorf("status counts %d tasks needing a person, want 0", n)
	}
	if n := l.wakes(); n != 0 {
		t.Errorf("%d wakes typed into a busy agent:\n%s", n, l.AgentLog())
	}

	l.completesOnItsFirstAttempt(t, busy, first)
}

// heldWakeLoop starts a loop whose wakes run out in 1 s, with no retry, and
// alpha's scripted agent held by a file (its env variable names it: a
// dialog shows, or it says it is busy, while the file exists), then puts
// task T-1 in State Hub for it. It returns the loop and the file.
func heldWakeLoop(t *testing.T, env string) (*loop, string) {
	t.Helper()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 1\nmax_attempts = 1\nretry_backoff_seconds = [1]\n"), "alpha")
	file := filepath.Join(l.Env.Root, "holds")
	if err := os.WriteFile(file, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.AgentEnv = env + "=" + file + " SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "alpha")
	h.Put(enginetest.Workplan("W-1", "alpha", enginetest.Todo("T-1", "alpha")))
	return l, file
}

// heldThreeDeadlines waits until the lease's one attempt has been held past
// three more ack deadlines, failing at once if it spent the attempt or grew
// the budget; it returns the lease as it first was.
func (l *loop) heldThreeDeadlines(t *testing.T, id string) api.Lease {
	t.Helper()
	first := l.lease(t, id)
	testutil.WaitFor(t, "three more ack deadlines", func() bool {
		ls := l.lease(t, id)
		if ls.State != "offered" || ls.Attempt != 1 || ls.MaxAttempts != first.MaxAttempts {
			t.Fatalf("a held wake spent its attempt: %+v", ls)
		}
		return ls.ExpiresAt.Sub(first.ExpiresAt) >= 3*time.Second
	})
	return first
}

// completesOnItsFirstAttempt removes the file that held the agent and
// waits for the lease to complete on its first attempt, its budget as it
// was, with the one wake typed once.
func (l *loop) completesOnItsFirstAttempt(t *testing.T, file string, first api.Lease) {
	t.Helper()
	if err := os.Remove(file); err != nil {
		t.Fatal(err)
	}
	id := first.LeaseID
	testutil.WaitFor(t, "the lease completed", func() bool { return l.lease(t, id).State == "completed" })
	if ls := l.lease(t, id); ls.Attempt != 1 || ls.MaxAttempts != first.MaxAttempts {
		t.Errorf("the completed lease: attempt %d of budget %d, want 1 of %d", ls.Attempt, ls.MaxAttempts, first.MaxAttempts)
	}
	if n := l.wakes(); n != 1 {
		t.Errorf("%d wakes typed, want 1:\n%s", n, l.AgentLog())
	}
}

// A wake pinned with --endpoint to an endpoint that dies (its tmux server
// killed) is routed to the repo's other live window, where its agent
// completes it. Once, the pin outlived the endpoint: every attempt went
// to it again, was refused ("not connected") and withdrawn with the budget
// grown, about every five seconds, while the other window idled.
func TestAPinnedWakeWhoseEndpointDiesGoesToTheLiveWindow(t *testing.T) {
	t.Parallel()
	l, doomed := doomedDialogWindow(t)
	l.openAgentOn(t, l.Tmux, "alpha", "complete", "")
	l.WaitAttached(t, "alpha", 2)
	pinned := l.endpointOf(t, doomed)
	res := l.Wake(t, "alpha", "--task", "T-1", "--endpoint", pinned)
	if res.Lease == nil || res.Lease.WakeOutcome != "resumed" {
		t.Fatalf("the pinned wake: %+v", res)
	}
	id := res.Lease.LeaseID
	l.waitWakeDeferred(t)
	doomed.Must(t, "kill-server")
	testutil.WaitFor(t, "the lease completed in the live window", func() bool { return l.lease(t, id).State == "completed" })
	if ls := l.lease(t, id); ls.Attempt-1 > ls.MaxAttempts-res.Lease.MaxAttempts {
		t.Errorf("the re-routed lease spent attempts: attempt %d of budget %d (was 1 of %d)", ls.Attempt, ls.MaxAttempts, res.Lease.MaxAttempts)
	}
	if n := l.wakes(); n != 1 {
		t.Errorf("%d wakes typed, want 1:\n%s", n, l.AgentLog())
	}
}

// The repo's only window dies under a pinned wake, and the operator forgets
// its endpoint: the pin ends with it. The work waits for a window, at no
// cost, and goes into the window opened next, on another tmux server.
// Once, the next attempts kept going to the forgotten endpoint, refused each
// time, and the new window never got the work.
func TestForgettingAPinnedWakesEndpointEndsThePin(t *testing.T) {
	t.Parallel()
	l, doomed := doomedDialogWindow(t)
	l.WaitAttached(t, "alpha", 1)
	pinned := l.endpointOf(t, doomed)
	res := l.Wake(t, "alpha", "--task", "T-1", "--endpoint", pinned)
	if res.Lease == nil || res.Lease.WakeOutcome != "resumed" {
		t.Fatalf("the pinned wake: %+v", res)
	}
	id := res.Lease.LeaseID
	l.waitWakeDeferred(t)
	doomed.Must(t, "kill-server")
	testutil.WaitFor(t, "tamq to see the endpoint gone", func() bool {
		return l.Env.Run(t, "tamq", "endpoints", "forget", pinned).Status == 0
	})
	testutil.WaitFor(t, "the lease waiting for a window", func() bool { return l.lease(t, id).State == "retry_wait" })
	waiting := l.lease(t, id)

	l.openAgentOn(t, l.Tmux, "alpha", "complete", "")
	testutil.WaitFor(t, "the lease completed in the new window", func() bool { return l.lease(t, id).State == "completed" })
	if ls := l.lease(t, id); ls.Attempt != waiting.Attempt || ls.MaxAttempts != waiting.MaxAttempts || ls.Attempt-1 > ls.MaxAttempts-res.Lease.MaxAttempts {
		t.Errorf("waiting for a window spent attempts: attempt %d of budget %d, then %d of %d (was 1 of %d)",
			waiting.Attempt, waiting.MaxAttempts, ls.Attempt, ls.MaxAttempts, res.Lease.MaxAttempts)
	}
	if n := l.wakes(); n != 1 {
		t.Errorf("%d wakes typed, want 1:\n%s", n, l.AgentLog())
	}
}

// waitWakeDeferred waits until the broker has given up its first try at
// writing the one wake (a dialog shows), and the wake waits in tamq's queue
// again: a window closed while its broker writes may have taken the text,
// and that attempt counts.
func (l *loop) waitWakeDeferred(t testing.TB) {
	t.Helper()
	testutil.WaitFor(t, "the wake back in tamq's queue", func() bool {
		ms := l.wakeMessages(t)
		return len(ms) == 1 && ms[0].State == "queued" && ms[0].LastError != ""
	})
}

// standing is one task's standing, asked in this process (tests poll it).
func (l *loop) standing(t testing.TB, id string) api.TaskStanding {
	t.Helper()
	res, err := client.New(l.PathsOf(t, paths.Engine)).Tasks(context.Background(), api.TasksArgs{})
	if err != nil {
		t.Fatalf("tasks: %v", err)
	}
	return enginetest.StandingOf(res, id)
}

// openAgentOn opens repo's window on tm's server running the scripted agent
// with plan and env ("K=V ..."), and waits until it is ready.
func (l *loop) openAgentOn(t testing.TB, tm *testutil.Tmux, repo, plan, env string) {
	t.Helper()
	before := strings.Count(l.AgentLog(), "ready")
	agent := "env SCRIPTED_AGENT_PLAN='" + plan + "' SCRIPTED_AGENT_LOG='" + l.LogFile + "' " + env + " " + filepath.Join(l.Env.Bin, "scriptedagent")
	l.Env.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", agent, "--mode", "trigger", repo)
	testutil.WaitFor(t, "the agent of "+repo+" on "+tm.Name, func() bool { return strings.Count(l.AgentLog(), "ready") > before })
}

// endpointOf is tamq's id of the attached endpoint on tm's server.
func (l *loop) endpointOf(t testing.TB, tm *testutil.Tmux) string {
	t.Helper()
	for _, e := range l.Status(t).Endpoints {
		if e.State == "attached" && strings.Contains(e.TmuxSocket, tm.Name) {
			return e.TamqEndpointID
		}
	}
	t.Fatalf("no attached endpoint on %s", tm.Name)
	return ""
}

// An agent that fails its task and quits leaves the retry with no agent to
// take it: `tasks` says a person must start one (on main: "retry at …",
// moving on every few seconds, counted as nothing to do), the wait spends
// nothing, and the work goes in once an agent runs in the repo's window.
func TestWorkWhoseAgentQuitWaitsForAPerson(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 10\nmax_attempts = 2\nretry_backoff_seconds = [1]\n"), "alpha")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "failquit", "alpha")
	h.Put(enginetest.Workplan("W-1", "alpha", enginetest.Todo("T-1", "alpha")))

	var s api.TaskStanding
	testutil.WaitFor(t, "T-1 to need a person", func() bool { s = l.standing(t, "T-1"); return s.Kind == "needs_you" })
	if !strings.HasPrefix(s.Words, "needs you: ") || !strings.Contains(s.Words, "(lease "+s.LeaseID+": its next attempt waits, no attempt used)") ||
		(s.Wait != "no_agent" && s.Wait != "no_window") {
		t.Errorf("T-1 with its agent gone: %+v", s)
	}
	if n := l.Status(t).Tasks["needs_you"]; n != 1 {
		t.Errorf("status counts %d tasks needing a person, want 1", n)
	}
	waiting := l.lease(t, s.LeaseID)

	l.openAgentOn(t, l.Tmux, "alpha", "complete", "SCRIPTED_AGENT_PUBLISH=1")
	testutil.WaitFor(t, "the lease completed", func() bool { return l.lease(t, s.LeaseID).State == "completed" })
	if ls := l.lease(t, s.LeaseID); ls.Attempt != waiting.Attempt || ls.MaxAttempts != waiting.MaxAttempts {
		t.Errorf("waiting for an agent spent attempts: attempt %d of %d, then %d of %d", waiting.Attempt, waiting.MaxAttempts, ls.Attempt, ls.MaxAttempts)
	}
}

// A wake held behind a dialog whose window then closes (the person closed
// it, or the agent died with it) waits for the window to be opened again,
// counted as needing a person and spending nothing, and goes into the new
// window's agent.
func TestAHeldWakeWhoseWindowClosedGoesIntoTheNextOne(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 1\nmax_attempts = 1\nretry_backoff_seconds = [1]\n"), "alpha")
	dialog := filepath.Join(l.Env.Root, "dialog")
	if err := os.WriteFile(dialog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.openAgentOn(t, l.Tmux, "alpha", "complete", "SCRIPTED_AGENT_DIALOG="+dialog)
	l.WaitAttached(t, "alpha", 1)
	h.Put(enginetest.Workplan("W-1", "alpha", enginetest.Todo("T-1", "alpha")))
	var s api.TaskStanding
	testutil.WaitFor(t, "T-1 held at its dialog", func() bool { s = l.standing(t, "T-1"); return s.Wait == "dialog" })
	first := l.lease(t, s.LeaseID)
	l.waitWakeDeferred(t)

	l.Tmux.Must(t, "kill-window", "-t", "alpha")
	testutil.WaitFor(t, "T-1 waiting for its window", func() bool {
		s = l.standing(t, "T-1")
		return s.Kind == "needs_you" && (s.Wait == "no_window" || s.Wait == "no_agent")
	})
	if !strings.Contains(s.Words, "(lease "+first.LeaseID+": ") || !strings.Contains(s.Words, "no attempt used)") {
		t.Errorf("T-1 with its window closed: %+v", s)
	}
	l.openAgentOn(t, l.Tmux, "alpha", "complete", "")
	testutil.WaitFor(t, "the lease completed", func() bool { return l.lease(t, first.LeaseID).State == "completed" })
	if ls := l.lease(t, first.LeaseID); ls.Attempt-first.Attempt > ls.MaxAttempts-first.MaxAttempts {
		t.Errorf("waiting for the window spent attempts: attempt %d of %d, then %d of %d", first.Attempt, first.MaxAttempts, ls.Attempt, ls.MaxAttempts)
	}
	if n := l.wakes(); n != 1 {
		t.Errorf("%d wakes typed, want 1:\n%s", n, l.AgentLog())
	}
}

// doomedDialogWindow starts a loop whose wakes run out in 2 s with one
// retry, and opens alpha's agent on a tmux server of its own (to be killed)
// showing a dialog, so that a wake pinned there waits behind it.
func doomedDialogWindow(t *testing.T) (*loop, *testutil.Tmux) {
	t.Helper()
	l := newLoop(t, "[coordination]\nwake_ack_timeout_seconds = 2\nmax_attempts = 2\nretry_backoff_seconds = [1]\n", "alpha")
	doomed := testutil.NewTmux(t)
	dialog := filepath.Join(l.Env.Root, "dialog")
	if err := os.WriteFile(dialog, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	l.openAgentOn(t, doomed, "alpha", "complete", "SCRIPTED_AGENT_DIALOG="+dialog)
	return l, doomed
}
