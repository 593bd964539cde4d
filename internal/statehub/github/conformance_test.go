package github_test

import (
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
)

// The GitHub driver passes the conformance suite against the double of
// GitHub's REST API.
func TestConformance(t *testing.T) {
	hubtest.Run(t, hubtest.Harness{Open: func(t *testing.T, repos ...string) (statehub.Hub, hubtest.Tracker) {
		w := newWorld(t, repos...)
		return w.driver(t, nil), w
	}})
}

// owner is the GitHub account the tests' repositories belong to.
const owner = "octo-org"

// world is GitHub (the double) and gita's repos whose origins name its
// repositories, in the hands of the people who use them. Its clock is the
// double's and the driver's.
type world struct {
	gh    *githubdouble.Server
	ts    *httptest.Server
	clock *clock.Fake
	dir   string // gita's registry directory
	root  string
}

// newWorld registers repos with gita as real git repositories whose origin
// is git@github.com:octo-org/<repo>.git, and makes those repositories on
// the double with the agent label.
func newWorld(t *testing.T, repos ...string) *world {
	t.Helper()
	clk := clock.NewFake(time.Date(2026, 12, 6, 9, 0, 0, 0, time.UTC))
	w := &world{gh: githubdouble.New(githubdouble.Options{Now: clk.Now}), clock: clk, root: t.TempDir()}
	w.ts = httptest.NewServer(w.gh.Handler())
	t.Cleanup(w.ts.Close)
	w.dir = filepath.Join(w.root, "gita")
	if err := os.MkdirAll(w.dir, 0o700); err != nil {
		t.Fatal(err)
	}
	for _, r := range repos {
		w.addRepo(t, r, "git@github.com:"+owner+"/"+r+".git")
		w.gh.AddRepo(owner+"/"+r, githubdouble.RepoOptions{})
		w.gh.CreateLabel(owner+"/"+r, "agent")
	}
	return w
}

// addRepo registers a git repository named name with origin as its origin
// remote ("" for none).
func (w *world) addRepo(t *testing.T, name, origin string) {
	t.Helper()
	path := filepath.Join(w.root, "src", name)
	git := func(args ...string) {
		if b, err := exec.Command("git", args...).CombinedOutput(); err != nil {
			t.Fatalf("git %v: %v\n%s", args, err, b)
		}
	}
	git("init", "-q", path)
	if origin != "" {
		git("-C", path, "remote", "add", "origin", origin)
	}
	f, err := os.OpenFile(filepath.Join(w.dir, "repos.csv"), os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteString(testutil.GitaRow(path, name)); err != nil {
		t.Fatal(err)
	}
}

// driver is a GitHub driver of the world, with more settings.
func (w *world) driver(t *testing.T, settings func(*config.GitHub)) *github.Driver {
	t.Helper()
	file := filepath.Join(w.root, "token")
	if err := os.WriteFile(file, []byte(w.gh.Token()+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	g := config.GitHub{Label: "agent", InProgressLabel: "in-progress", BlockedLabel: "blocked", NeedsHumanLabel: "needs-human",
		SecretsRequiredLabel: "secrets-required", DestructiveLabel: "destructive"}
	if settings != nil {
		settings(&g)
	}
	reader := gita.NewReader(w.dir)
	d, err := github.New(github.Options{APIBase: w.ts.URL, Credential: []string{"cat", file}, Settings: g, Registry: reader.Load, Clock: w.clock})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

func ref(t testing.TB, id string) githubdouble.IssueRef {
	t.Helper()
	repo, n, err := github.ParseTaskID(id)
	if err != nil {
		t.Fatal(err)
	}
	return githubdouble.IssueRef{Repo: repo, Number: n}
}

// labels are the labels a person puts on an issue to say task.
func labels(task hubtest.Task) []string {
	out := []string{"agent"}
	switch task.Status {
	case "in_progress":
		out = append(out, "in-progress")
	case "blocked":
		out = append(out, "blocked")
	}
	if task.NeedsHuman {
		out = append(out, "needs-human")
	}
	if task.SecretsRequired {
		out = append(out, "secrets-required")
	}
	if task.Destructive {
		out = append(out, "destructive")
	}
	if task.Priority != 0 {
		out = append(out, "priority:"+strconv.Itoa(task.Priority))
	}
	return out
}

func (w *world) AddTask(t testing.TB, repo string, task hubtest.Task) string {
	is := w.gh.CreateIssue(owner+"/"+repo, githubdouble.IssueInput{Title: task.Title, Body: task.Body, Labels: labels(task)})
	id := github.TaskID(owner+"/"+repo, is.Number)
	w.Change(t, id, task)
	return id
}

// Change is what a person does on github.com: retitle, relabel, close or
// reopen, and add or remove "blocked by" relationships.
func (w *world) Change(t testing.TB, id string, task hubtest.Task) {
	r := ref(t, id)
	is := w.gh.Issue(r.Repo, r.Number)
	if is.Title != task.Title {
		w.gh.SetTitle(r.Repo, r.Number, task.Title)
	}
	want := labels(task)
	for _, l := range is.Labels {
		if !slices.Contains(want, l) {
			w.gh.RemoveLabel(r.Repo, r.Number, l)
		}
	}
	var add []string
	for _, l := range want {
		if !slices.Contains(is.Labels, l) {
			add = append(add, l)
		}
	}
	if len(add) > 0 {
		w.gh.AddLabels(r.Repo, r.Number, add...)
	}
	switch {
	case task.Status == "done" && is.State != "closed":
		w.gh.Close(r.Repo, r.Number, "completed")
	case task.Status == "cancelled" && is.State != "closed":
		w.gh.Close(r.Repo, r.Number, "not_planned")
	case task.Status != "done" && task.Status != "cancelled" && is.State == "closed":
		w.gh.Reopen(r.Repo, r.Number)
	}
	var deps []githubdouble.IssueRef
	for _, d := range task.DependsOn {
		deps = append(deps, ref(t, d))
	}
	for _, b := range is.BlockedBy {
		if !slices.Contains(deps, b) {
			w.gh.RemoveBlockedBy(r.Repo, r.Number, b)
		}
	}
	for _, d := range deps {
		if !slices.Contains(is.BlockedBy, d) {
			w.gh.AddBlockedBy(r.Repo, r.Number, d)
		}
	}
}

func (w *world) Read(t testing.TB, id string) hubtest.Task {
	r := ref(t, id)
	is := w.gh.Issue(r.Repo, r.Number)
	task := hubtest.Task{Title: is.Title, Body: is.Body, Status: "todo"}
	switch {
	case is.State == "closed" && is.StateReason == "completed":
		task.Status = "done"
	case is.State == "closed":
		task.Status = "cancelled"
	case slices.Contains(is.Labels, "blocked"):
		task.Status = "blocked"
	case slices.Contains(is.Labels, "in-progress"):
		task.Status = "in_progress"
	}
	task.NeedsHuman = slices.Contains(is.Labels, "needs-human")
	for _, b := range is.BlockedBy {
		task.DependsOn = append(task.DependsOn, github.TaskID(b.Repo, b.Number))
	}
	if cs := w.gh.Comments(r.Repo, r.Number); len(cs) > 0 {
		task.Note = cs[len(cs)-1].Body
	}
	return task
}

func (w *world) Unknown(repo string) string { return github.TaskID(owner+"/"+repo, 999) }
func (w *world) Refuse(testing.TB)          { w.gh.SetToken("a-new-token-the-engine-does-not-have") }
func (w *world) Down(testing.TB)            { w.ts.Close() }
func (w *world) Secret() string             { return w.gh.Token() }

// Charged counts the requests GitHub counted against the rate limit.
func (w *world) Charged() int {
	n := 0
	for _, r := range w.gh.Requests() {
		if r.CountedAgainstLimit {
			n++
		}
	}
	return n
}

// Kept counts the receipts' comments on every issue of the world.
func (w *world) Kept(testing.TB) int {
	n := 0
	for _, r := range w.gh.Requests() {
		if r.Method == http.MethodPost && strings.HasSuffix(strings.SplitN(r.Path, "?", 2)[0], "/comments") && r.Status == http.StatusCreated {
			n++
		}
	}
	return n
}

// AddOutside opens an issue nobody labelled: not a task, but a task may
// be blocked by it.
func (w *world) AddOutside(_ testing.TB, repo string) string {
	is := w.gh.CreateIssue(owner+"/"+repo, githubdouble.IssueInput{Title: "a person's work"})
	return github.TaskID(owner+"/"+repo, is.Number)
}

func (w *world) Close(t testing.TB, id string) {
	r := ref(t, id)
	w.gh.Close(r.Repo, r.Number, "completed")
}
