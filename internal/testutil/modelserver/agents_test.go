//go:build agents

// The real agents' test is built only with the agents tag: run it with
// TAMQ_TEST_AGENTS=/path/to/.agents go test -tags agents -run TestModelServerDrivesRealAgents -v ./internal/testutil/modelserver/

package modelserver

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// dialogs are texts the agents show only in a dialog: a permission or
// approval prompt, a menu waiting for a choice.
var dialogs = []string{"Do you want to proceed", "Would you like to run", "Esc to cancel", "Press enter to continue", "Enter to confirm"}

// agentPane is an agent running alone in a private tmux server.
type agentPane struct {
	t      *testing.T
	socket string // the -L name
	path   string // the socket file, which tmux leaves behind
	home   string
	pid    int // the pane's process, leader of its process group
}

// startAgent runs argv in dir with env added, in a private tmux server,
// and registers its cleanup: the pane's process group, the server, and any
// process left with the agent's HOME.
func startAgent(t *testing.T, dir, home string, env, argv []string) *agentPane {
	t.Helper()
	a := &agentPane{t: t, socket: fmt.Sprintf("modelserver-%d-%d", os.Getpid(), time.Now().UnixNano()), home: home}
	args := []string{"new-session", "-d", "-s", "agent", "-x", "200", "-y", "50", "-c", dir}
	for _, kv := range env {
		args = append(args, "-e", kv)
	}
	args = append(args, argv...)
	if out, err := a.tmux(args...); err != nil {
		t.Fatalf("tmux new-session: %v\n%s", err, out)
	}
	t.Cleanup(a.stop)
	a.tmux("set-option", "-t", "agent", "remain-on-exit", "on")
	out, err := a.tmux("display", "-p", "-t", "agent", "#{pane_pid}")
	if err != nil {
		t.Fatalf("tmux display: %v\n%s", err, out)
	}
	a.pid, _ = strconv.Atoi(strings.TrimSpace(string(out)))
	out, _ = a.tmux("display", "-p", "#{socket_path}")
	a.path = strings.TrimSpace(string(out))
	return a
}

func (a *agentPane) tmux(args ...string) ([]byte, error) {
	return exec.Command("tmux", append([]string{"-L", a.socket, "-f", "/dev/null"}, args...)...).CombinedOutput()
}

func (a *agentPane) screen() string {
	out, _ := a.tmux("capture-pane", "-p", "-J", "-t", "agent")
	return string(out)
}

func (a *agentPane) title() string {
	out, _ := a.tmux("display", "-p", "-t", "agent", "#{pane_title}")
	return strings.TrimSpace(string(out))
}

func (a *agentPane) dead() bool {
	out, _ := a.tmux("display", "-p", "-t", "agent", "#{pane_dead}")
	return strings.TrimSpace(string(out)) == "1"
}

// dialog is the dialog text on screen, "" when there is none.
func (a *agentPane) dialog() string {
	s := a.screen()
	for _, d := range dialogs {
		if strings.Contains(s, d) {
			return d
		}
	}
	if strings.Contains(a.title(), "Action Required") {
		return "Action Required (pane title)"
	}
	return ""
}

// waitFor polls cond until it holds, failing at the deadline, when the
// agent shows a dialog, or when it exits.
func (a *agentPane) waitFor(what string, d time.Duration, cond func() bool) {
	a.t.Helper()
	if !testutil.Within(d, func() bool {
		if cond() {
			return true
		}
		if dlg := a.dialog(); dlg != "" {
			a.t.Fatalf("waiting for %s, the agent shows a dialog (%q):\n%s", what, dlg, a.screen())
		}
		if a.dead() {
			a.t.Fatalf("waiting for %s, the agent exited:\n%s", what, a.screen())
		}
		return false
	}) {
		a.t.Fatalf("timed out after %v waiting for %s; screen:\n%s", d, what, a.screen())
	}
}

// settle waits (a few seconds at most) for the screen to stay the same for
// a moment: the agent drew its prompt and stopped redrawing.
func (a *agentPane) settle() {
	testutil.Settled(300*time.Millisecond, 3*time.Second, a.screen)
}

func (a *agentPane) keys(args ...string) {
	a.t.Helper()
	if out, err := a.tmux(append([]string{"send-keys", "-t", "agent"}, args...)...); err != nil {
		a.t.Fatalf("tmux send-keys: %v\n%s", err, out)
	}
}

// stop kills the agent's process group and the tmux server, then looks for
// processes the agent left behind (anything still running with its HOME),
// kills them and fails the test.
func (a *agentPane) stop() {
	if a.pid > 0 {
		// A moment's grace to exit on SIGTERM, ended early once the
		// group is gone.
		syscall.Kill(-a.pid, syscall.SIGTERM)
		testutil.Within(300*time.Millisecond, func() bool { return syscall.Kill(-a.pid, 0) == syscall.ESRCH })
		syscall.Kill(-a.pid, syscall.SIGKILL)
	}
	a.tmux("kill-server")
	if a.path != "" {
		os.Remove(a.path)
	}
	var left []int
	testutil.Within(3*time.Second, func() bool { left = processesWithHome(a.home); return len(left) == 0 })
	for _, pid := range left {
		cmd, _ := os.ReadFile(fmt.Sprintf("/proc/%d/cmdline", pid))
		a.t.Errorf("process %d left behind after its tmux server ended: %s", pid, strings.ReplaceAll(string(cmd), "\x00", " "))
		syscall.Kill(pid, syscall.SIGKILL)
	}
}

// processesWithHome lists the live processes whose environment has
// HOME=home: the agent's, however they detached.
func processesWithHome(home string) []int {
	entries, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == os.Getpid() {
			continue
		}
		env, err := os.ReadFile(fmt.Sprintf("/proc/%d/environ", pid))
		if err != nil || !strings.Contains("\x00"+string(env), "\x00HOME="+home+"\x00") {
			continue
		}
		if stat, _ := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); strings.Contains(string(stat), ") Z ") {
			continue // a zombie: dead, waiting for its parent
		}
		pids = append(pids, pid)
	}
	return pids
}

func TestModelServerDrivesRealAgents(t *testing.T) {
	claude, codex, gemini := testutil.AgentBin(t, "claude"), testutil.AgentBin(t, "codex"), testutil.AgentBin(t, "gemini")
	wake := regexp.MustCompile(`run the scripted steps in (\S+)`)
	srv := Start(t, Rule{Regexp: wake, Steps: func(prompt string) []Step {
		dir := wake.FindStringSubmatch(prompt)[1]
		return []Step{
			Run("touch " + dir + "/one.txt"),
			{Text: "Now the second file.", Command: "touch " + dir + "/two.txt"},
			Say("Scripted steps finished in " + filepath.Base(dir) + "."),
		}
	}})

	// Each agent's files go to a folder of its own outside its project.
	type setup struct {
		env, argv []string
		ready     *regexp.Regexp // its input prompt, empty (Claude Code pads it with a no-break space)
	}
	agents := []struct {
		name  string
		agent string
		setup func(t *testing.T, home, repo, out string) setup
	}{
		{"claude", Claude, func(t *testing.T, home, repo, out string) setup {
			env := srv.ClaudeCodeEnv(t, ClaudeCodeSetup{Home: home, Repo: repo, Allow: []string{
				"Bash(touch " + out + "/one.txt:*)", "Bash(touch " + out + "/two.txt:*)", "Edit(/" + out + "/**)",
			}})
			return setup{env, []string{claude}, regexp.MustCompile(`(?m)^❯[\s\x{a0}]*$`)}
		}},
		{"codex", Codex, func(t *testing.T, home, repo, out string) setup {
			env, args := srv.CodexEnv(t, CodexSetup{Bin: codex, Home: home, Repo: repo,
				Allow: [][]string{{"touch", out + "/one.txt"}, {"touch", out + "/two.txt"}},
				// The sandbox may write only in the project: the files
				// outside it are written because the rules allow the commands.
				Config: "[sandbox_workspace_write]\nexclude_slash_tmp = true\nexclude_tmpdir_env_var = true\n",
			})
			return setup{env, append([]string{codex}, args...), regexp.MustCompile(`(?m)^› .*\n(.*\n)?\s*\? for shortcuts`)}
		}},
		{"gemini", Gemini, func(t *testing.T, home, repo, out string) setup {
			env := srv.GeminiEnv(t, GeminiSetup{Home: home, Repo: repo, Allow: []string{"touch " + out + "/one.txt", "touch " + out + "/two.txt"}})
			return setup{env, []string{gemini}, regexp.MustCompile(`(?m)^ >\s+Type your message`)}
		}},
	}
	for _, ag := range agents {
		t.Run(ag.name, func(t *testing.T) {
			root := t.TempDir()
			home, repo, out := filepath.Join(root, "home"), filepath.Join(root, "repo"), filepath.Join(root, "out-"+ag.name)
			for _, d := range []string{home, repo, out} {
				if err := os.MkdirAll(d, 0o755); err != nil {
					t.Fatal(err)
				}
			}
			if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
				t.Fatalf("git init: %v\n%s", err, out)
			}
			s := ag.setup(t, home, repo, out)

			start := time.Now()
			a := startAgent(t, repo, home, s.env, s.argv)
			defer func() {
				if t.Failed() {
					t.Logf("%s screen:\n%s", ag.name, a.screen())
				}
			}()
			a.waitFor("the input prompt", 2*time.Minute, func() bool { return s.ready.MatchString(a.screen()) })
			ready := time.Now()
			a.settle()

			prompt := "wake: run the scripted steps in " + out
			a.keys("-l", prompt)
			a.waitFor("the prompt to show in the input", 30*time.Second, func() bool { return strings.Contains(a.screen(), prompt) })
			// An Enter right after typed text is taken for part of it: a
			// person's pause, not a wait for an event.
			time.Sleep(500 * time.Millisecond)
			a.keys("Enter")
			entered := time.Now()
			submitted := func() bool {
				for _, r := range srv.Requests() {
					if r.Agent == ag.agent && strings.Contains(r.Prompt, prompt) {
						return true
					}
				}
				return false
			}
			// An Enter the agent took while still busy starting goes into
			// the input as a character; one more is safe while no request
			// came and the prompt is still there to submit.
			if !testutil.Within(15*time.Second, submitted) && strings.Contains(a.screen(), prompt) {
				t.Logf("%s: no request 15 s after Enter, the prompt still in its input: pressing Enter again", ag.name)
				a.keys("Enter")
			}

			files := []string{filepath.Join(out, "one.txt"), filepath.Join(out, "two.txt")}
			final := "Scripted steps finished in " + filepath.Base(out) + "."
			a.waitFor("both files and the final text", 2*time.Minute, func() bool {
				for _, f := range files {
					if _, err := os.Stat(f); err != nil {
						return false
					}
				}
				return strings.Contains(a.screen(), final)
			})
			done := time.Now()

			var firstCall time.Time
			var calls []string
			var last Request
			for _, r := range srv.Requests() {
				if r.Agent != ag.agent || !strings.Contains(r.Prompt, prompt) || r.Shell == "" {
					continue
				}
				if c, ok := strings.CutPrefix(r.Reply, "run "); ok {
					calls = append(calls, c)
					if firstCall.IsZero() {
						firstCall = r.Time
					}
				}
				last = r
			}
			want := []string{"touch " + files[0], "touch " + files[1]}
			if strings.Join(calls, "\n") != strings.Join(want, "\n") {
				t.Errorf("tool calls %q, want %q", calls, want)
			}
			if len(last.ToolResults) != 2 || last.Reply != "say "+final {
				t.Errorf("last request: %d tool results, reply %q", len(last.ToolResults), last.Reply)
			}
			t.Logf("%s: shell tool %q; start to prompt %v, Enter to first tool call %v, Enter to done %v",
				ag.name, last.Shell, ready.Sub(start).Round(time.Millisecond), firstCall.Sub(entered).Round(time.Millisecond), done.Sub(entered).Round(time.Millisecond))
		})
	}
}
