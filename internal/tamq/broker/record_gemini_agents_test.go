//go:build agents

package broker

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/modelserver"
)

// TestRecordGeminiScreens runs the real Gemini CLI (offline, against the
// scripted model server, in a private tmux server at 80x24) through the
// screens the broker must tell apart, and checks Classify and InputShows on
// each as the broker's model reads them: its first-start trust and sign-in
// screens (a dialog, never an empty prompt), its idle prompt, a draft, a
// paste over five lines ("[Pasted Text: N lines]"), a turn running a
// command (busy), and a permission box (a dialog) answered by a person.
// TAMQ_RECORD=fixtures writes the recordings into testdata/screens.
func TestRecordGeminiScreens(t *testing.T) {
	bin := testutil.AgentBin(t, "gemini")
	srv := modelserver.Start(t,
		modelserver.On("sleep for a while", modelserver.Run("sleep 4"), modelserver.Say("Slept.")),
		modelserver.On("touch the file", modelserver.Run("touch asked.txt"), modelserver.Say("Touched.")))
	type session struct {
		name  string
		setup func(g *modelserver.GeminiSetup)
		run   func(r *agentRun, f *fixture)
	}
	sessions := []session{
		{"gemini-trust", func(g *modelserver.GeminiSetup) { g.Repo = "" }, func(r *agentRun, f *fixture) {
			r.waitText("Do you trust the files in this folder", time.Minute)
			r.quiet(time.Second, 10*time.Second)
			f.Points = append(f.Points, r.point("trust", StateDialog))
		}},
		{"gemini-signin", func(g *modelserver.GeminiSetup) {
			g.Settings = map[string]any{"security": map[string]any{"auth": map[string]any{}}}
		}, func(r *agentRun, f *fixture) {
			r.waitText("Get started", time.Minute)
			r.quiet(time.Second, 10*time.Second)
			f.Points = append(f.Points, r.point("signin", StateDialog))
		}},
		{"gemini-loop", func(g *modelserver.GeminiSetup) { g.Allow = []string{"sleep 4"} }, func(r *agentRun, f *fixture) {
			r.waitText("Type your message", time.Minute)
			r.quiet(2*time.Second, 20*time.Second)
			f.Points = append(f.Points, r.point("prompt", StatePrompt))
			r.tmux("send-keys", "-t", r.pane, "-l", "my own draft")
			r.quiet(time.Second, 10*time.Second)
			f.Points = append(f.Points, r.point("draft", StatePromptText))
			r.tmux("send-keys", "-t", r.pane, "C-c")
			r.quiet(time.Second, 10*time.Second)
			f.Points = append(f.Points, r.point("cleared", StatePrompt))
			spec := pasteSpec{Prefix: prefixEngine, Chars: 600, Line: 72, Para: 3}
			r.paste(spec.text())
			r.quiet(time.Second, 10*time.Second)
			p := r.point("paste-lines-600", StatePromptText)
			shows := true
			p.Paste, p.Shows = &spec, &shows
			f.Points = append(f.Points, p)
			r.tmux("send-keys", "-t", r.pane, "C-c")
			r.quiet(time.Second, 10*time.Second)
			short := pasteSpec{Prefix: prefixOperator, Chars: 300}
			r.paste(short.text())
			r.quiet(time.Second, 10*time.Second)
			p = r.point("paste-line-300", StatePromptText)
			p.Paste, p.Shows = &short, &shows
			f.Points = append(f.Points, p)
			r.tmux("send-keys", "-t", r.pane, "C-c")
			r.quiet(time.Second, 10*time.Second)

			r.submit("please sleep for a while")
			r.waitText("sleep 4", 30*time.Second)
			// A moment into the four-second command, as a delivery arriving
			// while it runs would find the screen: the pause is that
			// arrival, not a wait for an event.
			time.Sleep(1500 * time.Millisecond)
			r.screen()
			f.Points = append(f.Points, r.point("busy-command", StateBusy))
			r.waitText("Slept.", 30*time.Second)
			r.quiet(2*time.Second, 20*time.Second)
			f.Points = append(f.Points, r.point("after-turn", StatePrompt))

			r.submit("please touch the file")
			r.waitText("Allow execution", 30*time.Second)
			r.quiet(time.Second, 10*time.Second)
			f.Points = append(f.Points, r.point("permission", StateDialog))
			// A person's answer: the first option, allow once.
			r.tmux("send-keys", "-t", r.pane, "1")
			r.waitText("Touched.", 30*time.Second)
			r.quiet(2*time.Second, 20*time.Second)
			f.Points = append(f.Points, r.point("answered", StatePrompt))
		}},
	}
	out := os.Getenv("TAMQ_RECORD_OUT")
	if out == "" {
		out = t.TempDir()
	}
	os.MkdirAll(out, 0o755)
	var recorded []fixture
	for _, sess := range sessions {
		t.Run(sess.name, func(t *testing.T) {
			root, err := os.MkdirTemp("", "tamq-rec-")
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { os.RemoveAll(root) })
			home, repo := filepath.Join(root, "home"), filepath.Join(root, "repo")
			os.MkdirAll(home, 0o755)
			os.MkdirAll(repo, 0o755)
			g := modelserver.GeminiSetup{Home: home, Repo: repo}
			if sess.setup != nil {
				sess.setup(&g)
			}
			env := srv.GeminiEnv(t, g)
			if g.Repo == "" {
				os.Remove(filepath.Join(home, ".gemini", "trustedFolders.json"))
			}
			r := startRec(t, root, repo, AgentGemini, 80, 24, append(env, "TERM=xterm-256color"), bin)
			f := fixture{Name: sess.name, Agent: AgentGemini, Cols: 80, Rows: 24}
			sess.run(r, &f)
			for _, p := range f.Points {
				t.Logf("%s@%s title %q cursor %d,%d visible %v", sess.name, p.Label, p.Title, p.X, p.Y, p.Visible)
			}
			raw := r.finish()
			for i, p := range f.Points {
				m := NewModel(80, 24, nil)
				feedModel(t, m, raw[:p.Offset])
				s := m.Snapshot()
				s.Agent = AgentGemini
				m.Close()
				// tmux's answer was trimmed; Gemini CLI pads its title.
				if strings.TrimSpace(s.Title) == p.Title {
					f.Points[i].Title = s.Title
				}
				state, why := Classify(s)
				if os.Getenv("TAMQ_RECORD_SHOW") != "" {
					t.Logf("%s@%s: %s (%s)\n%s", sess.name, p.Label, state, why, strings.Join(s.Rows, "\n"))
				}
				if state != p.Want {
					t.Errorf("%s@%s: Classify = %s (%s), want %s\n%s", sess.name, p.Label, state, why, p.Want, strings.Join(s.Rows, "\n"))
				}
				if p.Paste != nil {
					if ok, why := InputShows(s, p.Paste.text()); ok != *p.Shows {
						t.Errorf("%s@%s: InputShows = %v (%s)\n%s", sess.name, p.Label, ok, why, strings.Join(s.Rows, "\n"))
					}
				}
			}
			os.WriteFile(filepath.Join(out, sess.name+".raw"), raw, 0o644)
			recorded = append(recorded, f)
		})
	}
	if os.Getenv("TAMQ_RECORD") == "fixtures" && !t.Failed() {
		writeFixtures(t, out, recorded)
	}
}

// startRec starts command with env in dir, in a private tmux server of the
// given size whose pane's output goes to root/out.raw, and follows it with
// the broker's model.
func startRec(t *testing.T, root, dir, agent string, cols, rows int, env []string, command string) *agentRun {
	r := &agentRun{t: t, agent: agent, socket: fmt.Sprintf("tamq-rec-%d-%d", os.Getpid(), time.Now().UnixNano()),
		raw: filepath.Join(root, "out.raw"), model: NewModel(cols, rows, nil)}
	t.Cleanup(r.model.Close)
	goFile := filepath.Join(root, "go")
	r.pane = r.tmux("-f", "/dev/null", "new-session", "-d", "-P", "-F", "#{pane_id}", "-x", fmt.Sprint(cols), "-y", fmt.Sprint(rows), "-c", dir,
		fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exec env %s %s", goFile, strings.Join(env, " "), command))
	socket := r.tmux("display", "-p", "#{socket_path}")
	t.Cleanup(func() {
		r.tmux("kill-server")
		os.Remove(socket)
	})
	r.tmux("set", "-g", "remain-on-exit", "on")
	r.tmux("pipe-pane", "-O", "-t", r.pane, "cat > "+r.raw)
	os.WriteFile(goFile, nil, 0o600)
	r.root = root
	return r
}

// waitText waits for text on the screen tmux shows.
func (r *agentRun) waitText(text string, d time.Duration) {
	r.t.Helper()
	re := regexp.MustCompile(regexp.QuoteMeta(text))
	if !testutil.Within(d, func() bool { return re.MatchString(r.tmux("capture-pane", "-p", "-t", r.pane)) }) {
		r.t.Fatalf("%q never showed:\n%s", text, r.tmux("capture-pane", "-p", "-t", r.pane))
	}
}

// submit types a prompt and presses Enter after a pause.
func (r *agentRun) submit(prompt string) {
	r.tmux("send-keys", "-t", r.pane, "-l", prompt)
	r.waitText(prompt, 10*time.Second)
	// A person's pause, not a wait for an event: an Enter right after typed
	// text is taken for part of it (a newline to Gemini CLI).
	time.Sleep(300 * time.Millisecond)
	r.tmux("send-keys", "-t", r.pane, "Enter")
}

// finish stops recording and returns the output with the recording's
// folder replaced by a neutral path of the same length.
func (r *agentRun) finish() []byte {
	r.tmux("pipe-pane", "-t", r.pane)
	raw, err := os.ReadFile(r.raw)
	if err != nil {
		r.t.Fatal(err)
	}
	return neutral(raw, r.root)
}
