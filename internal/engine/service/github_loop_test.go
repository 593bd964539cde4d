package service_test

import (
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
)

// ghOwner owns the loop's GitHub repositories.
const ghOwner = "octo-org"

// githubLoop is a loop whose State Hub is GitHub Issues (the double of its
// REST API), each repo's origin naming its GitHub repository.
func githubLoop(t *testing.T, coordination string, repos ...string) (*loop, *githubdouble.Server) {
	t.Helper()
	gh := githubdouble.Start(t, githubdouble.Options{})
	token := filepath.Join(t.TempDir(), "gh-token")
	if err := os.WriteFile(token, []byte(gh.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, r := range repos {
		gh.AddRepo(ghOwner+"/"+r, githubdouble.RepoOptions{})
		gh.CreateLabel(ghOwner+"/"+r, "agent")
	}
	cfg := fmt.Sprintf("[statehub]\nkind = \"github\"\napi_base = %q\ncredential_command = [\"cat\", %q]\n\n[coordination]\nstatehub_poll_interval_seconds = 1\n%s",
		gh.URL(), token, coordination)
	e := testutil.NewEnv(t)
	paths := e.Gita(t, repos...)
	for _, r := range repos {
		// Registered before the engine starts: its first look finds them.
		if b, err := exec.Command("git", "-C", paths[r], "remote", "add", "origin", "git@github.com:"+ghOwner+"/"+r+".git").CombinedOutput(); err != nil {
			t.Fatalf("git remote add: %v\n%s", err, b)
		}
	}
	return newLoopIn(t, e, cfg), gh
}

// The loop driven from GitHub Issues, end to end with real tmux, both
// daemons and scripted agents: B (in beta) is blocked by A (in alpha);
// labelling both wakes A's repo only; A's agent reads its description and
// closes it through the engine, and B's repo is woken next. An issue
// without the label, one labelled needs-human (explain names the gate) and
// a pull request carrying the label wake nobody. A secondary rate limit
// pauses the looks for its Retry-After, and then they resume; looks at an
// unchanged GitHub are 304s.
func TestGitHubIssuesDriveTheLoop(t *testing.T) {
	t.Parallel()
	l, gh := githubLoop(t, "wake_ack_timeout_seconds = 30\n", "alpha", "beta")
	l.AgentEnv = "SCRIPTED_AGENT_PUBLISH=1"
	l.agents(t, "complete", "alpha", "beta")
	alpha, beta := ghOwner+"/alpha", ghOwner+"/beta"
	a := gh.CreateIssue(alpha, githubdouble.IssueInput{Title: "A", Body: "Do A first.\nThen say so."})
	b := gh.CreateIssue(beta, githubdouble.IssueInput{Title: "B"})
	gh.AddBlockedBy(beta, b.Number, githubdouble.IssueRef{Repo: alpha, Number: a.Number})
	c := gh.CreateIssue(alpha, githubdouble.IssueInput{Title: "C, nobody labelled it", AuthorAssociation: "NONE"})
	d := gh.CreateIssue(beta, githubdouble.IssueInput{Title: "D", Labels: []string{"agent", "needs-human"}})
	p := gh.CreatePullRequest(alpha, githubdouble.IssueInput{Title: "P", Labels: []string{"agent"}})
	idA, idB, idC, idD, idP := github.TaskID(alpha, a.Number), github.TaskID(beta, b.Number), github.TaskID(alpha, c.Number),
		github.TaskID(beta, d.Number), github.TaskID(alpha, p.Number)
	testutil.WaitFor(t, "D to stop at its gate", func() bool { return l.Explain(t, idD).Gate == "human" })

	gh.AddLabels(alpha, a.Number, "agent")
	gh.AddLabels(beta, b.Number, "agent")
	testutil.WaitFor(t, "A closed on GitHub", func() bool { return gh.Issue(alpha, a.Number).State == "closed" })
	if got := gh.Issue(alpha, a.Number); got.StateReason != "completed" {
		t.Errorf("A closed as %q", got.StateReason)
	}
	testutil.WaitFor(t, "B closed on GitHub", func() bool { return gh.Issue(beta, b.Number).State == "closed" })
	log := l.AgentLog()
	doneA, wakeB := strings.Index(log, "statehub "+idA+" done\n"), strings.Index(log, "task="+idB)
	if doneA < 0 || wakeB < doneA || strings.Count(log, "task="+idA) != 1 || strings.Count(log, "task="+idB) != 1 {
		t.Fatalf("A then B, once each, not so:\n%s", log)
	}
	if !strings.Contains(log, "taskshow "+idA+" -> 0") || !strings.Contains(log, "statehub "+idA+" -> 0") {
		t.Errorf("A's agent did not read and close its task through the engine:\n%s", log)
	}
	for _, id := range []string{idC, idD, idP} {
		if strings.Contains(log, "task="+id+" ") || strings.Contains(log, "task="+id+"\n") {
			t.Errorf("%s woke an agent:\n%s", id, log)
		}
	}
	if e := l.Explain(t, idD); e.Gate != "human" || !strings.Contains(e.URL, "/"+beta+"/issues/"+strconv.Itoa(d.Number)) {
		t.Errorf("explain %s: gate %q, url %q", idD, e.Gate, e.URL)
	}
	for _, id := range []string{idC, idP} {
		if e := l.Explain(t, id); e.Observed || len(e.Triggers) != 0 {
			t.Errorf("%s is a task: %+v", id, e)
		}
	}
	st := l.Status(t).StateHub
	if st.Kind != "github" || st.Budget == nil || st.NextLook == nil || len(st.Watched) != 2 || st.Receipts != "local" {
		t.Errorf("status: %+v", st)
	}

	// Unchanged: every look is a 304, free. What the loop did last (the
	// agent's close, its receipts) may still reach GitHub on a loaded
	// machine: the looks are let settle to 304s first, then counted.
	unchanged := func(r githubdouble.Request) bool {
		return r.Method != http.MethodGet || r.Conditional && r.Status == http.StatusNotModified && !r.CountedAgainstLimit
	}
	gh.ResetRequests()
	testutil.WaitFor(t, "the looks to settle", func() bool {
		rs := gh.Requests()
		if !slices.ContainsFunc(rs, func(r githubdouble.Request) bool { return !unchanged(r) }) {
			return len(rs) >= 4
		}
		gh.ResetRequests()
		return false
	})
	gh.ResetRequests()
	testutil.WaitFor(t, "two unchanged looks", func() bool { return len(gh.Requests()) >= 4 })
	for _, r := range gh.Requests() {
		if r.Method == http.MethodGet && (!r.Conditional || r.Status != http.StatusNotModified || r.CountedAgainstLimit) {
			t.Errorf("an unchanged look asked %s: status %d, conditional %v, counted %v", r.Path, r.Status, r.Conditional, r.CountedAgainstLimit)
		}
	}

	// A secondary limit of 5 s: one request meets it, none follows within
	// the 5 s, and the looks resume after.
	gh.ResetRequests()
	gh.SecondaryLimit(5*time.Second, http.StatusForbidden)
	limited := time.Now()
	testutil.WaitFor(t, "a look to meet the limit", func() bool { return gh.EarlyRetries() >= 1 })
	testutil.WaitUpTo(t, "the looks to resume", 30*time.Second, func() bool {
		for _, r := range gh.Requests() {
			if r.Status != http.StatusForbidden {
				return true
			}
		}
		return false
	})
	var refused, resumed time.Time
	for _, r := range gh.Requests() {
		switch {
		case r.Status == http.StatusForbidden && refused.IsZero():
			refused = r.At
		case r.Status != http.StatusForbidden && resumed.IsZero():
			resumed = r.At
		}
	}
	if n := gh.EarlyRetries(); n != 1 {
		t.Errorf("%d requests inside the secondary limit; one met it, and the engine must wait", n)
	}
	// The double stamps whole seconds; Retry-After counts from the refusal.
	if resumed.Before(limited.Add(4 * time.Second)) {
		t.Errorf("the looks resumed %s after the limit of 5 s began", resumed.Sub(limited))
	}
	if resumed.Sub(refused) > 8*time.Second {
		t.Errorf("the looks resumed only %s after the refusal", resumed.Sub(refused))
	}
}

// docSteps are the fenced blocks of a section of a doc, in order: their
// language and their lines (indented blocks of a list taken as written).
func docSteps(t *testing.T, doc, section string) [][2]string {
	t.Helper()
	b, err := os.ReadFile(doc)
	if err != nil {
		t.Fatal(err)
	}
	text := string(b)
	start := strings.Index(text, "\n"+section+"\n")
	if start < 0 {
		t.Fatalf("%s has no section %q", doc, section)
	}
	text = text[start+len(section)+2:]
	if end := strings.Index(text, "\n## "); end >= 0 {
		text = text[:end]
	}
	var blocks [][2]string
	var lang string
	var body []string
	in := false
	for _, line := range strings.Split(text, "\n") {
		trimmed := strings.TrimSpace(line)
		switch {
		case !in && strings.HasPrefix(trimmed, "```"):
			in, lang, body = true, strings.TrimPrefix(trimmed, "```"), nil
		case in && trimmed == "```":
			in = false
			blocks = append(blocks, [2]string{lang, strings.Join(body, "\n")})
		case in:
			body = append(body, trimmed)
		}
	}
	return blocks
}

// writeDocConfig writes a doc's config block into the file its first line
// names ("# ~/.config/PROGRAM/config.toml").
func writeDocConfig(t *testing.T, e *testutil.Env, body string) {
	t.Helper()
	first, _, _ := strings.Cut(body, "\n")
	file, ok := strings.CutPrefix(first, "# ~/.config/")
	if !ok {
		t.Fatalf("a config block that names no file:\n%s", body)
	}
	if err := os.MkdirAll(filepath.Join(e.Config, filepath.Dir(file)), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(e.Config, file), []byte(body+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// openDocAgent runs a doc's `tamq open … --command claude …` in tm's
// private server with the scripted agent in claude's place, and waits
// until the agent (logging to log) is ready.
func openDocAgent(t *testing.T, e *testutil.Env, tm *testutil.Tmux, args []string, agent, log string) {
	t.Helper()
	args = append([]string{"open", "--tmux-socket", tm.Name}, args[2:]...)
	args[slices.Index(args, "claude")] = agent
	e.Tamq(t, args...)
	testutil.WaitFor(t, "the agent to start", func() bool { b, _ := os.ReadFile(log); return strings.Contains(string(b), "ready") })
}

// shellWords splits a command line as sh does for the quoting the docs
// use: blanks, '…' and "…".
func shellWords(t *testing.T, line string) []string {
	var words []string
	var cur strings.Builder
	quote, inWord := rune(0), false
	for _, r := range line {
		switch {
		case quote != 0 && r == quote:
			quote = 0
		case quote != 0:
			cur.WriteRune(r)
		case r == '\'' || r == '"':
			quote, inWord = r, true
		case r == ' ' || r == '\t':
			if inWord {
				words, inWord = append(words, cur.String()), false
				cur.Reset()
			}
		default:
			cur.WriteRune(r)
			inWord = true
		}
	}
	if quote != 0 {
		t.Fatalf("unbalanced quote in %q", line)
	}
	if inWord {
		words = append(words, cur.String())
	}
	return words
}

// flagOf is the value of --name in args.
func flagOf(args []string, name string) string {
	for i, a := range args {
		if a == "--"+name && i+1 < len(args) {
			return args[i+1]
		}
	}
	return ""
}

// The steps of docs/trackers.md, "GitHub Issues, from zero", and the
// README's quick start that points at them, followed as written against
// the double of GitHub's API: the config blocks go into the files they
// name, every other command runs as written with the programs on PATH.
// What cannot run here is done as it would be: gh's steps are done the way
// gh does them (its REST calls; `gh auth token`, which the engine runs, is a
// stand-in printing the double's token), the agent is the scripted one
// rather than claude, in a private tmux server, and STATEHUB_API_BASE points
// both programs at the double.
func TestTheTrackersDocRunsAsWritten(t *testing.T) {
	t.Parallel()
	steps := docSteps(t, "../../../docs/trackers.md", "## GitHub Issues, from zero")
	readme := docSteps(t, "../../../README.md", "### Drive it from GitHub Issues")
	if len(steps) < 6 || len(readme) == 0 {
		t.Fatalf("the docs' steps are not where this test looks: %d in trackers.md, %d in the README", len(steps), len(readme))
	}
	for _, r := range readme {
		if r[0] == "toml" && !slices.ContainsFunc(steps, func(s [2]string) bool { return s[1] == r[1] }) {
			t.Errorf("the README's config is not trackers.md's:\n%s", r[1])
		}
	}
	gh := githubdouble.Start(t, githubdouble.Options{})
	gh.AddRepo(ghOwner+"/alpha", githubdouble.RepoOptions{})
	e := testutil.NewEnv(t)
	e.Gita(t, "alpha")
	if b, err := exec.Command("git", "-C", filepath.Join(e.Root, "src", "alpha"), "remote", "add", "origin", "git@github.com:"+ghOwner+"/alpha.git").CombinedOutput(); err != nil {
		t.Fatalf("git remote add: %v\n%s", err, b)
	}
	// gh auth token, as gh answers it once logged in.
	standins := filepath.Join(e.Root, "standins")
	os.MkdirAll(standins, 0o755)
	if err := os.WriteFile(filepath.Join(standins, "gh"), []byte("#!/bin/sh\n[ \"$1 $2\" = \"auth token\" ] || exit 2\necho '"+gh.Token()+"'\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	for i, kv := range e.Vars {
		if strings.HasPrefix(kv, "PATH=") {
			e.Vars[i] = "PATH=" + e.Bin + ":" + standins + ":" + strings.TrimPrefix(kv, "PATH=")
		}
	}
	e.Vars = append(e.Vars, "STATEHUB_API_BASE="+gh.URL())
	tm := testutil.NewTmux(t)
	log := filepath.Join(e.Root, "agent.log")
	agent := "env SCRIPTED_AGENT_LOG='" + log + "' SCRIPTED_AGENT_PUBLISH=1 " + filepath.Join(e.Bin, "scriptedagent")
	t.Cleanup(func() {
		e.Run(t, "tamq", "stop")
		e.Run(t, "coordination-engine", "stop")
	})
	api := &http.Client{}
	ghDo := func(method, path, body string) {
		req, _ := http.NewRequest(method, gh.URL()+path, strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+gh.Token())
		resp, err := api.Do(req)
		if err != nil || resp.StatusCode/100 != 2 {
			t.Fatalf("%s %s: %v %v", method, path, resp, err)
		}
		resp.Body.Close()
	}
	for _, step := range steps {
		lang, body := step[0], step[1]
		if lang == "toml" {
			writeDocConfig(t, e, body)
			continue
		}
		for _, line := range strings.Split(body, "\n") {
			args := shellWords(t, line)
			if len(args) == 0 {
				continue
			}
			switch {
			case args[0] == "gh" && args[1] == "auth" && args[2] == "login":
				// The token gh keeps: the stand-in prints it.
			case args[0] == "gh" && args[1] == "label" && args[2] == "create":
				ghDo(http.MethodPost, "/repos/"+flagOf(args, "repo")+"/labels", fmt.Sprintf(`{"name": %q, "description": %q}`, args[3], flagOf(args, "description")))
			case args[0] == "gh" && args[1] == "issue" && args[2] == "create":
				ghDo(http.MethodPost, "/repos/"+flagOf(args, "repo")+"/issues",
					fmt.Sprintf(`{"title": %q, "body": %q, "labels": [%q]}`, flagOf(args, "title"), flagOf(args, "body"), flagOf(args, "label")))
			case args[0] == "tamq" && args[1] == "open":
				openDocAgent(t, e, tm, args, agent, log)
			default:
				r := e.Run(t, args[0], args[1:]...)
				if r.Status != 0 {
					t.Fatalf("%s: %s", line, r)
				}
				t.Logf("%s\n%s", line, r.Stdout)
				if line == "coordination-engine doctor" && (!strings.Contains(r.Stdout, "github-token") || !strings.Contains(r.Stdout, "github-repo alpha")) {
					t.Errorf("doctor did not check GitHub:\n%s", r.Stdout)
				}
			}
		}
	}
	// The issue the docs made is a task, and its agent took it and closed it.
	id := github.TaskID(ghOwner+"/alpha", 1)
	testutil.WaitFor(t, "the agent to close "+id, func() bool { return gh.Issue(ghOwner+"/alpha", 1).State == "closed" })
	if tasks := e.Engine(t, "tasks").Stdout; !strings.Contains(tasks, id) || !strings.Contains(tasks, "/"+ghOwner+"/alpha/issues/1") {
		t.Errorf("tasks:\n%s", tasks)
	}
	if b, _ := os.ReadFile(log); !strings.Contains(string(b), "taskshow "+id+" -> 0") {
		t.Errorf("the agent did not read its task:\n%s", b)
	}
}
