// Command scriptedagent stands in for a coding agent in the end-to-end tests
// of the wake loop (and, later, the demo). It runs in a tamq window like a
// real agent: it reads what arrives on its terminal, and when a wake prompt
// ends with "coordination-engine lease ack LEASE" it plays its part with the
// agent commands, as the prompt tells an agent to.
//
// SCRIPTED_AGENT_PLAN chooses the part, one word per wake in order (the last
// word repeats):
//
//	complete  ack, renew, checkpoint, release --result completed
//	stall     do nothing: the lease runs out and the work is offered again
//	ackstall  ack, checkpoint, then nothing (the lease expires while held)
//	fail      ack, release --result failed
//	block     ack, release --result blocked
//
// SCRIPTED_AGENT_LOG names a file that receives one line per event:
// "wake LEASE ATTEMPT checkpoint=yes|no task=ID" for each prompt, then
// "run ARGS... -> STATUS" for each command it ran.
//
// SCRIPTED_AGENT_STATEHUB, when set, is State Hub's address: a "complete"
// part then marks the prompt's task done there before it releases the
// lease, as a real agent updates its tracker (with the bearer token in
// SCRIPTED_AGENT_STATEHUB_TOKEN when State Hub wants one).
package main

import (
	"bufio"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
)

var (
	ackLine     = regexp.MustCompile(`lease ack (\S+)\s*$`)
	attemptLine = regexp.MustCompile(`lease (\S+), attempt (\d+) of`)
	taskLine    = regexp.MustCompile(`^Task (\S+?)(?: "| in workplan |\.$)`)
)

func main() {
	plan := strings.Fields(os.Getenv("SCRIPTED_AGENT_PLAN"))
	if len(plan) == 0 {
		plan = []string{"complete"}
	}
	logf := func(format string, args ...any) {
		if path := os.Getenv("SCRIPTED_AGENT_LOG"); path != "" {
			f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
			if err == nil {
				fmt.Fprintf(f, format+"\n", args...)
				f.Close()
			}
		}
	}
	fmt.Println("scripted agent ready")
	logf("ready")
	in := bufio.NewScanner(os.Stdin)
	in.Buffer(make([]byte, 64*1024), 64*1024)
	wakes := 0
	attempt, resumed, task := "?", false, ""
	for in.Scan() {
		// Bracketed paste markers and carriage returns are terminal
		// framing, not text.
		line := strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "", "\r", "").Replace(in.Text())
		if m := attemptLine.FindStringSubmatch(line); m != nil {
			attempt, resumed, task = m[2], false, ""
		}
		if m := taskLine.FindStringSubmatch(line); m != nil {
			task = m[1]
		}
		if strings.Contains(line, "Resume from your latest checkpoint") {
			resumed = true
		}
		m := ackLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		lease := m[1]
		logf("wake %s %s checkpoint=%s task=%s", lease, attempt, yesNo(resumed), task)
		part := plan[min(wakes, len(plan)-1)]
		wakes++
		run := func(args ...string) {
			cmd := exec.Command(engine(), args...)
			cmd.Stdout, cmd.Stderr = os.Stdout, os.Stderr
			status := 0
			if err := cmd.Run(); err != nil {
				status = -1
				if x, ok := err.(*exec.ExitError); ok {
					status = x.ExitCode()
				}
			}
			logf("run %s -> %d", strings.Join(args, " "), status)
		}
		switch part {
		case "complete":
			run("lease", "ack", lease)
			run("lease", "renew", lease)
			run("checkpoint", "--lease", lease, "--summary", "scripted work done", "--file", "work.txt", "--next", "nothing")
			if hub := os.Getenv("SCRIPTED_AGENT_STATEHUB"); hub != "" && task != "" {
				logf("statehub %s done -> %s", task, markDone(hub, task))
			}
			run("lease", "release", lease, "--result", "completed")
		case "ackstall":
			run("lease", "ack", lease)
			run("checkpoint", "--lease", lease, "--summary", "half of the scripted work", "--next", "the other half")
		case "fail":
			run("lease", "ack", lease)
			run("lease", "release", lease, "--result", "failed", "--reason", "scripted failure")
		case "block":
			run("lease", "ack", lease)
			run("lease", "release", lease, "--result", "blocked", "--reason", "needs a human")
		case "stall":
		}
		logf("done %s", lease)
	}
}

// markDone sets the task's status to done in State Hub; it returns the
// answer's status line, or the error.
func markDone(hub, task string) string {
	req, err := http.NewRequest(http.MethodPatch, strings.TrimRight(hub, "/")+"/v1/tasks/"+url.PathEscape(task), strings.NewReader(`{"status":"done"}`))
	if err != nil {
		return err.Error()
	}
	req.Header.Set("Content-Type", "application/json")
	if token := os.Getenv("SCRIPTED_AGENT_STATEHUB_TOKEN"); token != "" {
		req.Header.Set("Authorization", "Bearer "+token)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return err.Error()
	}
	resp.Body.Close()
	return resp.Status
}

// engine is the coordination-engine beside this program (the tests build
// them into one directory), else the one on PATH.
func engine() string {
	if exe, err := os.Executable(); err == nil {
		sibling := filepath.Join(filepath.Dir(exe), "coordination-engine")
		if _, err := os.Stat(sibling); err == nil {
			return sibling
		}
	}
	return "coordination-engine"
}

func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}
