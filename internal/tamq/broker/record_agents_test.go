//go:build agents

// The recorder of real agents' screens is built only with the agents tag:
// `make test` neither builds nor runs it.

package broker

import (
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
)

// TestRecordPastes pastes texts of many sizes into the real Claude Code and
// Codex (offline, fake keys, each in a private tmux server at a given size),
// records what they print, replays it through the broker's screen model and
// checks InputShows on every paste: the text shows, or (a draft typed
// first, a busy agent) it does not.
//
//	TAMQ_TEST_AGENTS=$PWD/.agents TAMQ_RECORD=sweep \
//	    go test -tags agents -run TestRecordPastes -timeout 3h -v ./internal/tamq/broker/
//
// Unset, TAMQ_RECORD runs the check `make test-agents` runs: at 80 columns,
// each agent's pastes around its placeholder threshold and a draft beside a
// paste (about a minute). TAMQ_RECORD=sweep runs the sweep (widths 80 to
// 250, heights 24 and 50; what it records stays in TAMQ_RECORD_OUT, a
// temporary folder when unset); TAMQ_RECORD=fixtures records the screens
// kept in testdata/screens and writes them there, with their points in
// fixtures.json. TAMQ_RECORD_ONLY, a regular expression, picks sessions by
// name.
func TestRecordPastes(t *testing.T) {
	dir := testutil.AgentsDir(t)
	var sessions []recSession
	switch mode := os.Getenv("TAMQ_RECORD"); mode {
	case "sweep":
		sessions = sweepSessions()
	case "fixtures":
		sessions = fixtureSessions()
	case "":
		sessions = checkSessions()
	default:
		t.Fatalf("TAMQ_RECORD is %q: unset (the check), sweep or fixtures", mode)
	}
	if only := os.Getenv("TAMQ_RECORD_ONLY"); only != "" {
		re := regexp.MustCompile(only)
		sessions = slices.DeleteFunc(sessions, func(s recSession) bool { return !re.MatchString(s.Name) })
	}
	out := os.Getenv("TAMQ_RECORD_OUT")
	if out == "" {
		out = t.TempDir()
	}
	os.MkdirAll(out, 0o755)
	var mu sync.Mutex
	var recorded []fixture
	// Two at a time: the machine is small, and an agent slowed down draws
	// its screens late.
	sem := make(chan struct{}, 2)
	t.Run("sessions", func(t *testing.T) {
		for _, sess := range sessions {
			t.Run(sess.Name, func(t *testing.T) {
				t.Parallel()
				sem <- struct{}{}
				defer func() { <-sem }()
				f, raw := record(t, dir, sess)
				os.WriteFile(filepath.Join(out, sess.Name+".raw"), raw, 0o644)
				mu.Lock()
				recorded = append(recorded, f)
				mu.Unlock()
			})
		}
	})
	slices.SortFunc(recorded, func(a, b fixture) int { return strings.Compare(a.Name, b.Name) })
	b, _ := json.MarshalIndent(recorded, "", " ")
	os.WriteFile(filepath.Join(out, "points.json"), b, 0o644)
	t.Logf("recorded in %s", out)
	if os.Getenv("TAMQ_RECORD") == "fixtures" && !t.Failed() {
		writeFixtures(t, out, recorded)
	}
}

// recSession is one run of an agent at one size, with the pastes made
// into it in turn (the box cleared with Ctrl-C after each).
type recSession struct {
	Name       string
	Agent      string
	Cols, Rows int
	Cases      []recCase
}

type recCase struct {
	Label string
	Paste pasteSpec
	// Draft is typed before the paste: the box then holds more than the
	// paste.
	Draft string
	// Busy submits a prompt first, then pastes while the agent works on
	// it (offline: retries reaching its API). It ends the session.
	Busy bool
}

// shows is what InputShows must answer after the case's paste.
func (c recCase) shows() bool { return c.Draft == "" && !c.Busy }

func (c recCase) want() string {
	if c.Busy {
		return StateBusy
	}
	return StatePromptText
}

// sizeCases are pastes of each size, one line and broken into lines.
func sizeCases(single, multi, long []int) []recCase {
	var cs []recCase
	prefix := func(i int) string { return [2]string{prefixEngine, prefixOperator}[i%2] }
	for i, n := range single {
		cs = append(cs, recCase{Label: fmt.Sprintf("line-%d", n), Paste: pasteSpec{Prefix: prefix(i), Chars: n}})
	}
	for i, n := range multi {
		cs = append(cs, recCase{Label: fmt.Sprintf("lines-%d", n), Paste: pasteSpec{Prefix: prefix(i + 1), Chars: n, Line: 72, Para: 3}})
	}
	for i, n := range long {
		cs = append(cs, recCase{Label: fmt.Sprintf("long-lines-%d", n), Paste: pasteSpec{Prefix: prefix(i), Chars: n, Line: 300}})
	}
	return cs
}

// negatives: a draft and then a paste (short, and long enough for a
// placeholder), then a paste while the agent is busy (last: it ends the
// session).
func negatives() []recCase {
	return []recCase{
		{Label: "draft+line-500", Draft: "my own draft ", Paste: pasteSpec{Prefix: prefixOperator, Chars: 500}},
		{Label: "draft+line-1300", Draft: "my own draft ", Paste: pasteSpec{Prefix: prefixEngine, Chars: 1300}},
		{Label: "busy+line-500", Busy: true, Paste: pasteSpec{Prefix: prefixEngine, Chars: 500}},
	}
}

func sweepSessions() []recSession {
	var ss []recSession
	cases := append(sizeCases(
		[]int{1, 26, 300, 799, 800, 801, 999, 1000, 1001, 1300, 8192},
		[]int{60, 150, 500, 799, 801, 999, 1001, 1300, 8192},
		[]int{700, 999, 2000}), negatives()...)
	for _, size := range [][2]int{{80, 24}, {100, 24}, {120, 24}, {160, 24}, {200, 24}, {250, 24}, {80, 50}, {120, 50}, {200, 50}, {250, 50}} {
		for _, agent := range []string{AgentClaude, AgentCodex} {
			ss = append(ss, recSession{Name: fmt.Sprintf("%s-sweep-%dx%d", agent, size[0], size[1]), Agent: agent, Cols: size[0], Rows: size[1], Cases: cases})
		}
	}
	return ss
}

// checkSessions are the check every `make test-agents` runs: the pastes
// either side of each agent's placeholder threshold (Claude Code: 800
// characters; Codex: 1,000), one of 8 KiB over lines, and a draft beside a
// paste, at the narrowest width.
func checkSessions() []recSession {
	cases := append(sizeCases([]int{799, 801, 999, 1001}, []int{8192}, nil), negatives()[0])
	var ss []recSession
	for _, agent := range []string{AgentClaude, AgentCodex} {
		ss = append(ss, recSession{Name: agent + "-check-80x24", Agent: agent, Cols: 80, Rows: 24, Cases: cases})
	}
	return ss
}

// fixtureSessions are the recordings kept in testdata/screens: the sizes
// around each agent's thresholds (Claude Code: 800 characters, three lines;
// Codex: 1,000 characters) at the narrowest and widest supported widths.
func fixtureSessions() []recSession {
	cases := append(sizeCases(
		[]int{500, 800, 801, 999, 1000, 1001, 8192},
		[]int{150, 999, 1300, 8192},
		[]int{999}), negatives()...)
	cases = slices.Insert(cases, 0, recCase{Label: "lines-3", Paste: pasteSpec{Prefix: prefixOperator, Chars: 60, Line: 25}},
		recCase{Label: "lines-4", Paste: pasteSpec{Prefix: prefixOperator, Chars: 80, Line: 25}})
	var ss []recSession
	for _, size := range [][2]int{{80, 24}, {250, 50}} {
		for _, agent := range []string{AgentClaude, AgentCodex} {
			ss = append(ss, recSession{Name: fmt.Sprintf("%s-paste-%dx%d", agent, size[0], size[1]), Agent: agent, Cols: size[0], Rows: size[1], Cases: cases})
		}
	}
	return ss
}

// Fake keys of the right shape: the agents start with them and fail only
// when they reach for their API.
const (
	recAnthropicKey = "sk-ant-api03-tamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtesttamqtestAA"
	recOpenAIKey    = "sk-proj-tamqtesttamqtesttamqtesttamqtesttamqtestab"
)

// agentRun drives one agent in a private tmux server whose pane's output
// goes to a file, and keeps the broker's model of it.
type agentRun struct {
	t      *testing.T
	agent  string
	socket string
	pane   string
	raw    string
	model  *Model
	fed    int
	root   string
}

func (r *agentRun) tmux(args ...string) string {
	r.t.Helper()
	out, err := exec.Command("tmux", append([]string{"-L", r.socket}, args...)...).CombinedOutput()
	if err != nil {
		r.t.Fatalf("tmux %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return strings.TrimSpace(string(out))
}

func (r *agentRun) size() int {
	fi, err := os.Stat(r.raw)
	if err != nil {
		return 0
	}
	return int(fi.Size())
}

// quiet waits until the agent printed nothing for d (at most limit).
func (r *agentRun) quiet(d, limit time.Duration) {
	testutil.Settled(d, limit, r.size)
}

// screen feeds the model what the agent printed so far and reads it.
func (r *agentRun) screen() (Screen, int) {
	b, err := os.ReadFile(r.raw)
	if err != nil && !os.IsNotExist(err) {
		r.t.Fatal(err)
	}
	if len(b) > r.fed {
		for p := b[r.fed:]; len(p) > 0; {
			n := min(len(p), 32<<10)
			r.model.Write(p[:n])
			p = p[n:]
			testutil.WaitFor(r.t, "the model to take in the agent's output", func() bool { return r.model.Handled() >= uint64(r.fed+n) })
			r.fed += n
		}
	}
	s := r.model.Snapshot()
	s.Agent = r.agent
	return s, r.fed
}

func (r *agentRun) waitState(want string, d time.Duration) bool {
	return testutil.Within(d, func() bool { s, _ := r.screen(); st, _ := Classify(s); return st == want })
}

func (r *agentRun) paste(text string) {
	r.t.Helper()
	f := filepath.Join(filepath.Dir(r.raw), "paste.txt")
	if err := os.WriteFile(f, []byte(text), 0o600); err != nil {
		r.t.Fatal(err)
	}
	r.tmux("load-buffer", "-b", "rec", f)
	r.tmux("paste-buffer", "-p", "-r", "-d", "-b", "rec", "-t", r.pane)
}

// point reads the screen now, as the model and as tmux see it.
func (r *agentRun) point(label, want string) fixturePoint {
	_, off := r.screen()
	p := fixturePoint{Label: label, Offset: off, Want: want}
	f := strings.Fields(r.tmux("display", "-p", "-t", r.pane, "#{cursor_x} #{cursor_y} #{cursor_flag}"))
	fmt.Sscan(f[0], &p.X)
	fmt.Sscan(f[1], &p.Y)
	p.Visible = f[2] == "1"
	p.Title = r.tmux("display", "-p", "-t", r.pane, "#{pane_title}")
	return p
}

// record runs one session and returns its fixture and the raw output (the
// recording folder's path replaced by a neutral one of the same length).
func record(t *testing.T, agentsDir string, sess recSession) (fixture, []byte) {
	// Short: the agents print the folder, and a neutral path of the same
	// length must fit in it.
	root, err := os.MkdirTemp("", "tamq-rec-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(root) })
	repo := filepath.Join(root, "repo")
	home := filepath.Join(root, "home")
	os.MkdirAll(repo, 0o755)
	os.MkdirAll(home, 0o755)
	bin := filepath.Join(agentsDir, "node_modules", ".bin", map[string]string{AgentClaude: "claude", AgentCodex: "codex"}[sess.Agent])
	var env []string
	command := bin
	switch sess.Agent {
	case AgentClaude:
		cfg, _ := json.Marshal(map[string]any{
			"hasCompletedOnboarding": true,
			"customApiKeyResponses":  map[string][]string{"approved": {recAnthropicKey[len(recAnthropicKey)-20:]}, "rejected": {}},
			"projects":               map[string]any{repo: map[string]bool{"hasTrustDialogAccepted": true}},
		})
		os.WriteFile(filepath.Join(home, ".claude.json"), cfg, 0o600)
		env = []string{"HOME=" + home, "ANTHROPIC_API_KEY=" + recAnthropicKey, "DISABLE_AUTOUPDATER=1",
			"CLAUDE_CODE_DISABLE_NONESSENTIAL_TRAFFIC=1", "TERM=xterm-256color"}
	case AgentCodex:
		os.MkdirAll(filepath.Join(home, ".codex"), 0o755)
		env = []string{"HOME=" + home, "OPENAI_API_KEY=" + recOpenAIKey, "TERM=xterm-256color"}
		login := exec.Command(bin, "login", "--with-api-key")
		login.Env, login.Dir = append(os.Environ(), env...), repo
		login.Stdin = strings.NewReader(recOpenAIKey + "\n")
		if out, err := login.CombinedOutput(); err != nil {
			t.Fatalf("codex login: %v\n%s", err, out)
		}
		os.WriteFile(filepath.Join(home, ".codex", "config.toml"), fmt.Appendf(nil, "[projects.%q]\ntrust_level = \"trusted\"\n", repo), 0o600)
		command += " --no-daemon"
	}
	r := &agentRun{t: t, agent: sess.Agent, socket: fmt.Sprintf("tamq-rec-%d-%d", os.Getpid(), time.Now().UnixNano()),
		raw: filepath.Join(root, "out.raw"), model: NewModel(sess.Cols, sess.Rows, nil)}
	defer r.model.Close()
	goFile := filepath.Join(root, "go")
	// The agent starts once the pane's output goes to the file.
	r.pane = r.tmux("-f", "/dev/null", "new-session", "-d", "-P", "-F", "#{pane_id}", "-x", fmt.Sprint(sess.Cols), "-y", fmt.Sprint(sess.Rows), "-c", repo,
		fmt.Sprintf("while [ ! -e %s ]; do sleep 0.05; done; exec env %s %s", goFile, strings.Join(env, " "), command))
	socket := r.tmux("display", "-p", "#{socket_path}")
	t.Cleanup(func() {
		exec.Command("tmux", "-L", r.socket, "kill-server").Run()
		os.Remove(socket) // tmux leaves its socket file behind
	})
	r.tmux("set", "-g", "remain-on-exit", "on")
	r.tmux("pipe-pane", "-O", "-t", r.pane, "cat > "+r.raw)
	os.WriteFile(goFile, nil, 0o600)

	f := fixture{Name: sess.Name, Agent: sess.Agent, Cols: sess.Cols, Rows: sess.Rows}
	dump := func(what string) {
		s, _ := r.screen()
		t.Errorf("%s: %s\n%s", sess.Name, what, strings.Join(s.Rows, "\n"))
	}
	if !r.waitState(StatePrompt, 3*time.Minute) {
		dump("the prompt never showed")
		return f, nil
	}
	r.quiet(2*time.Second, 20*time.Second)
	if !r.waitState(StatePrompt, 10*time.Second) {
		dump("the prompt went away")
		return f, nil
	}
	f.Points = append(f.Points, r.point("prompt", StatePrompt))
	for _, c := range sess.Cases {
		text := c.Paste.text()
		if c.Busy {
			r.submit("hello")
			if !r.waitState(StateBusy, 20*time.Second) {
				dump("not busy after a prompt was submitted")
				break
			}
			// A moment into the turn, as a paste arriving while the agent
			// works would find it: the pause is that arrival, not a wait
			// for an event.
			time.Sleep(time.Second)
		}
		if c.Draft != "" {
			r.tmux("send-keys", "-t", r.pane, "-l", c.Draft)
			r.quiet(500*time.Millisecond, 5*time.Second)
		}
		r.paste(text)
		r.quiet(800*time.Millisecond, 15*time.Second)
		p := r.point(c.Label, c.want())
		spec, shows := c.Paste, c.shows()
		p.Paste, p.Draft, p.Shows = &spec, c.Draft, &shows
		f.Points = append(f.Points, p)
		s, _ := r.screen()
		state, why := Classify(s)
		ok, whyNot := InputShows(s, text)
		if state != p.Want || ok != shows {
			t.Errorf("%s@%s: Classify = %s (%s), want %s; InputShows = %v (%s), want %v\n%s", sess.Name, c.Label, state, why, p.Want, ok, whyNot, shows, strings.Join(s.Rows, "\n"))
		}
		if c.Busy {
			break
		}
		r.tmux("send-keys", "-t", r.pane, "C-c")
		// Claude Code quits on a second Ctrl-C within a moment.
		time.Sleep(2 * time.Second)
		r.quiet(time.Second, 10*time.Second)
		if !r.waitState(StatePrompt, 10*time.Second) {
			dump("Ctrl-C did not empty the box")
			break
		}
	}
	r.tmux("pipe-pane", "-t", r.pane)
	raw, err := os.ReadFile(r.raw)
	if err != nil {
		t.Fatal(err)
	}
	raw = neutral(raw, root)
	return f, raw
}

// neutral replaces the recording's folder by a neutral path of the same
// length, so offsets stay.
func neutral(raw []byte, root string) []byte {
	n := "/home/user/" + strings.Repeat("w", max(len(root)-len("/home/user/"), 0))
	return []byte(strings.ReplaceAll(string(raw), root, n))
}

// writeFixtures puts recorded sessions into testdata/screens: the raw
// output next to the others, the points into fixtures.json (in place of a
// fixture of the same name, else at its end).
func writeFixtures(t *testing.T, out string, recorded []fixture) {
	dir := "testdata/screens"
	b, err := os.ReadFile(filepath.Join(dir, "fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var all []fixture
	if err := json.Unmarshal(b, &all); err != nil {
		t.Fatal(err)
	}
	for _, f := range recorded {
		raw, err := os.ReadFile(filepath.Join(out, f.Name+".raw"))
		if err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(dir, f.Name+".raw"), raw, 0o644); err != nil {
			t.Fatal(err)
		}
		if i := slices.IndexFunc(all, func(g fixture) bool { return g.Name == f.Name }); i >= 0 {
			all[i] = f
		} else {
			all = append(all, f)
		}
	}
	b, _ = json.MarshalIndent(all, "", " ")
	if err := os.WriteFile(filepath.Join(dir, "fixtures.json"), append(b, '\n'), 0o644); err != nil {
		t.Fatal(err)
	}
}
