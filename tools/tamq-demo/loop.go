package main

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"text/tabwriter"
	"time"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// startHub runs the reference State Hub (coordination-engine dev-statehub)
// where it listens by default, its Unix socket in the demo's runtime
// directory (where both programs look for it by default), with its data in
// the demo's directory, and learns its address from the line it prints.
func (d *demo) startHub(ctx context.Context) error {
	cmd := exec.Command(d.engine, "dev-statehub", "--data", d.hubData())
	cmd.Env = d.env()
	stderr, err := cmd.StderrPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return fmt.Errorf("starting the reference State Hub: %v", err)
	}
	d.hub = cmd
	// Its pid is kept beside its data, so a cleanup after --keep finds it.
	if err := os.WriteFile(d.hubPIDFile(), []byte(strconv.Itoa(cmd.Process.Pid)), 0o600); err != nil {
		return err
	}
	lines := make(chan string, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if _, url, ok := strings.Cut(sc.Text(), "reference State Hub on "); ok {
				lines <- strings.Fields(url)[0]
			}
		}
	}()
	select {
	case url := <-lines:
		if err := d.useHub(url); err != nil {
			return err
		}
	case <-ctx.Done():
		return fmt.Errorf("waiting for the reference State Hub to listen: %w", ctx.Err())
	}
	d.say("statehub   the reference State Hub at %s (data %s)", d.hubURL, d.hubData())
	if err := d.writeTamqConfig(); err != nil {
		return err
	}
	return d.writeEngineConfig()
}

// stopHub stops the reference State Hub the demo started (this run, or an
// earlier one kept with --keep: found by its pid file and its program).
func (d *demo) stopHub(ctx context.Context) error {
	pid := servicePID(d.hubPIDFile(), d.engine)
	if pid == 0 {
		return nil
	}
	syscall.Kill(pid, syscall.SIGTERM)
	if d.hub != nil {
		go d.hub.Wait() // reap it
	}
	if waitUntil(ctx, func() bool { return !alive(pid) }) != nil {
		syscall.Kill(pid, syscall.SIGKILL)
		return fmt.Errorf("the reference State Hub (pid %d) did not stop", pid)
	}
	return nil
}

// startEngine starts coordination-engine and waits until tamq has attached
// its windows to it.
func (d *demo) startEngine(ctx context.Context) error {
	if _, err := d.call(ctx, "coordination-engine", "start", "--detach"); err != nil {
		return err
	}
	if err := d.waitEngineWindows(ctx, len(repos)); err != nil {
		return err
	}
	d.say("engine     started; tamq attached its %d windows", len(repos))
	return nil
}

// waitEngineWindows waits until tamq has attached n windows to the engine.
func (d *demo) waitEngineWindows(ctx context.Context, n int) error {
	for {
		var st struct {
			Endpoints []struct {
				State   string `json:"state"`
				Windows []struct {
					Repo string `json:"repo"`
				} `json:"windows"`
			} `json:"endpoints"`
		}
		out, _ := d.call(ctx, "coordination-engine", "status", "--json")
		if json.Unmarshal(out, &st) == nil {
			for _, ep := range st.Endpoints {
				if ep.State == "attached" && len(ep.Windows) == n {
					return nil
				}
			}
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("waiting for tamq to attach to the engine: %w", err)
		}
	}
}

// seed puts the demo's work into State Hub, as a user's tracker would have
// it: A in alpha; B in beta, which depends on A; in gamma a task that needs
// a human and one whose proposed action is destructive; and a message from
// beta to gamma that asks for action.
func (d *demo) seed(ctx context.Context) error {
	task := func(id, title, repo string, deps ...string) contract.Task {
		return contract.Task{ID: id, Title: title, Status: "todo", Repo: repo, DependsOn: deps}
	}
	human := task(taskHuman, "choose the release date", "gamma")
	human.NeedsHuman = true
	destructive := task(taskDestructive, "drop the legacy tables", "gamma")
	destructive.ProposedActions = []contract.ProposedAction{{Category: "destructive", Summary: "DROP TABLE legacy_*"}}
	for _, wp := range []contract.Workplan{
		{ID: "W-alpha", Repo: "alpha", Status: "active", Tasks: []contract.Task{task(taskA, "publish the new API", "alpha")}},
		{ID: "W-beta", Repo: "beta", Status: "active", Tasks: []contract.Task{task(taskB, "move the client to the new API", "beta", taskA)}},
		{ID: "W-gamma", Repo: "gamma", Status: "active", Tasks: []contract.Task{human, destructive}},
	} {
		if err := d.hubDo(ctx, http.MethodPut, "/v1/workplans/"+wp.ID, wp, nil); err != nil {
			return err
		}
	}
	msg := contract.Message{ID: messageID, ToRepo: "gamma", From: "beta", Subject: "please review the client change", RequestsAction: true}
	if err := d.hubDo(ctx, http.MethodPost, "/v1/messages", msg, nil); err != nil {
		return err
	}
	d.say("seeded     task A (alpha); B (beta) depends on A; H needs a human, D is destructive (gamma); message %s beta -> gamma", messageID)
	return nil
}

// explanation is the part of `coordination-engine explain --json` the demo
// reads.
type explanation struct {
	Verdict  string `json:"verdict"`
	Triggers []struct {
		State      string `json:"state"`
		GateReason string `json:"gate_reason"`
		Why        string `json:"why"`
		Leases     []struct {
			State   string `json:"state"`
			Attempt int    `json:"attempt"`
		} `json:"leases"`
	} `json:"triggers"`
}

// done says whether the loop has run its course: A and B done in State
// Hub, the message read, both gated tasks stopped, no lease live, and every
// receipt published.
func (d *demo) done(ctx context.Context) (bool, string) {
	var wps struct{ Workplans []contract.Workplan }
	if err := d.hubDo(ctx, http.MethodGet, "/v1/workplans", nil, &wps); err != nil {
		return false, err.Error()
	}
	status := map[string]string{}
	for _, wp := range wps.Workplans {
		for _, t := range wp.Tasks {
			status[t.ID] = t.Status
		}
	}
	for _, id := range []string{taskA, taskB} {
		if status[id] != "done" {
			return false, "task " + id + " is " + status[id]
		}
	}
	var unread struct{ Messages []contract.Message }
	if err := d.hubDo(ctx, http.MethodGet, "/v1/messages?unread=true", nil, &unread); err != nil || len(unread.Messages) > 0 {
		return false, "message " + messageID + " is unread"
	}
	for _, id := range []string{taskHuman, taskDestructive} {
		if x, err := d.explain1(ctx, id); err != nil || len(x.Triggers) == 0 || x.Triggers[0].State != "stopped" {
			return false, "task " + id + " is not stopped yet"
		}
	}
	var st struct {
		StateHub struct {
			Unpublished int `json:"unpublished_receipts"`
		} `json:"statehub"`
		Leases struct {
			Counts map[string]int `json:"counts"`
		} `json:"leases"`
	}
	out, _ := d.call(ctx, "coordination-engine", "status", "--json")
	if err := json.Unmarshal(out, &st); err != nil {
		return false, "engine status: " + err.Error()
	}
	for _, live := range []string{"offered", "acknowledged", "running", "checkpointed", "retry_wait"} {
		if st.Leases.Counts[live] > 0 {
			return false, fmt.Sprintf("%d lease(s) %s", st.Leases.Counts[live], live)
		}
	}
	if st.StateHub.Unpublished > 0 {
		return false, fmt.Sprintf("%d of the engine's receipts to publish", st.StateHub.Unpublished)
	}
	// tamq's receipts reach State Hub through the engine.
	out, _ = d.call(ctx, "tamq", "status", "--json")
	st.StateHub.Unpublished = -1
	if err := json.Unmarshal(out, &st); err != nil || st.StateHub.Unpublished != 0 {
		return false, "tamq's receipts to publish"
	}
	return true, ""
}

// waitLoop waits until the loop has run its course.
func (d *demo) waitLoop(ctx context.Context) error {
	d.say("waiting    for A, then B (beta's agent stalls once), the message, and the gates...")
	for {
		ok, why := d.done(ctx)
		if ok {
			return nil
		}
		if err := pause(ctx, 100*time.Millisecond); err != nil {
			return fmt.Errorf("the loop did not finish (%s): %w", why, err)
		}
	}
}

// receipt is the part of `coordination-engine receipts --json` the timeline
// shows.
type receipt struct {
	At             time.Time      `json:"at"`
	Kind           string         `json:"kind"`
	TriggerID      string         `json:"trigger_id"`
	LeaseID        string         `json:"lease_id"`
	Status         string         `json:"status"`
	Reason         string         `json:"reason"`
	Attempt        int            `json:"attempt"`
	LocalMessageID string         `json:"local_message_id"`
	Detail         map[string]any `json:"detail"`
}

// timelineKinds are the receipts the timeline shows: the loop's steps.
var timelineKinds = []string{
	"trigger.observed", "trigger.stopped", "lease.offered", "wake.sent", "lease.acknowledged",
	"checkpoint.recorded", "lease.retry_wait", "lease.reoffered", "lease.completed", "lease.stopped",
}

// report prints the timeline, the stopped receipts of the gated tasks and
// the engine's explanation of B.
func (d *demo) report(ctx context.Context) error {
	out, err := d.call(ctx, "coordination-engine", "receipts", "--json", "--limit", "1000")
	if err != nil {
		return err
	}
	var res struct{ Receipts []receipt }
	if err := json.Unmarshal(out, &res); err != nil {
		return fmt.Errorf("coordination-engine receipts --json: %v", err)
	}
	// What each trigger is about, from its first receipt.
	about := map[string]string{}
	for _, r := range res.Receipts {
		if r.Kind == "trigger.observed" {
			what := fmt.Sprintf("%v %v", r.Detail["source"], r.Detail["source_id"])
			if r.Detail["source"] == "task" {
				what = fmt.Sprintf("task %v", r.Detail["source_id"])
			}
			about[r.TriggerID] = fmt.Sprintf("%-6v %s", r.Detail["target_repo"], what)
		}
	}
	var shown []receipt
	var t0 time.Time
	for _, r := range res.Receipts {
		if slices.Contains(timelineKinds, r.Kind) && about[r.TriggerID] != "" {
			if t0.IsZero() {
				t0 = r.At
			}
			shown = append(shown, r)
		}
	}
	w := d.out
	fmt.Fprintf(w, "\nTimeline (the engine's receipts; times from the first observation):\n")
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "  AT\tREPO   ABOUT\tSTEP\tSTATUS\tDETAIL")
	for _, r := range shown {
		fmt.Fprintf(tw, "  +%.3fs\t%s\t%s\t%s\t%s\n", r.At.Sub(t0).Seconds(), about[r.TriggerID], r.Kind, r.Status, detail(r))
	}
	tw.Flush()
	fmt.Fprintf(w, "\nStopped at a gate (no lease, no wake, never another repo):\n")
	for _, id := range []string{taskHuman, taskDestructive} {
		x, err := d.explain1(ctx, id)
		if err != nil {
			return err
		}
		fmt.Fprintf(w, "  task %s: %s\n", id, x.Verdict)
	}
	// What the agents said to each other through tamq (gamma answered the
	// message's sender with a To: line).
	out, err = d.call(ctx, "tamq", "history", "--json", "--body")
	if err != nil {
		return err
	}
	var msgs []struct {
		Sender     string  `json:"sender"`
		SenderKind string  `json:"sender_kind"`
		Target     string  `json:"target"`
		State      string  `json:"state"`
		Body       *string `json:"body"`
	}
	if err := json.Unmarshal(out, &msgs); err != nil {
		return fmt.Errorf("tamq history --json: %v", err)
	}
	wakes := 0
	fmt.Fprintf(w, "\nRelayed by tamq between the agents:\n")
	for _, m := range msgs {
		if m.SenderKind == "coordination" {
			wakes++
			continue
		}
		if m.Body != nil {
			fmt.Fprintf(w, "  %s -> %s (%s): %s\n", m.Sender, m.Target, m.State, *m.Body)
		}
	}
	fmt.Fprintf(w, "  (and %d wake prompts from coordination-engine)\n", wakes)
	out, err = d.call(ctx, "coordination-engine", "explain", taskB)
	if err != nil {
		return err
	}
	fmt.Fprintf(w, "\n$ coordination-engine explain %s\n%s\n", taskB, out)
	return nil
}

// detail is a timeline row's last column: the attempt, the reason, tamq's
// message id.
func detail(r receipt) string {
	var parts []string
	if r.Attempt > 0 {
		parts = append(parts, fmt.Sprintf("attempt %d", r.Attempt))
	}
	if r.Reason != "" {
		parts = append(parts, r.Reason)
	}
	if r.Kind == "wake.sent" && r.LocalMessageID != "" {
		parts = append(parts, "tamq message "+r.LocalMessageID)
	}
	if r.Kind == "lease.completed" {
		parts = append(parts, "work done, State Hub updated")
	}
	return strings.Join(parts, ", ")
}
