//go:build trackers

package beads_test

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// The beads driver passes the conformance suite against the real bd
// (TAMQ_TEST_BD: `make test-trackers` builds the pinned one).
func TestConformance(t *testing.T) {
	hubtest.Run(t, hubtest.Harness{Open: func(t *testing.T, repos ...string) (statehub.Hub, hubtest.Tracker) {
		w := newWorld(t, repos...)
		return w.driver(t), w
	}})
}

// realBD is the bd the tests run: make test-trackers sets it.
func realBD(t testing.TB) string {
	t.Helper()
	bd := os.Getenv("TAMQ_TEST_BD")
	if bd == "" {
		t.Fatal("TAMQ_TEST_BD is unset: run `make test-trackers`, which builds the pinned bd (scripts/install-bd) and sets it")
	}
	return bd
}

// templates are initialized databases, made once per repo name and copied
// for each case: `bd init` takes some two seconds.
var templates struct {
	sync.Mutex
	dir  string
	made map[string]bool
}

// world is repos registered with gita, each with a beads database, in the
// hands of the people who use bd. The driver runs bd through a shim that
// counts its processes (the tracker's "budget": a look at an unchanged
// database must start none).
type world struct {
	bd, shim, count, home, gita string
	repos                       map[string]string // slug → path
}

func newWorld(t *testing.T, repos ...string) *world {
	t.Helper()
	root := t.TempDir()
	w := &world{bd: realBD(t), home: filepath.Join(root, "home"), gita: filepath.Join(root, "gita"), repos: map[string]string{},
		count: filepath.Join(root, "bd-runs"), shim: filepath.Join(root, "bin", "bd")}
	for _, d := range []string{w.home, w.gita, filepath.Dir(w.shim)} {
		if err := os.MkdirAll(d, 0o700); err != nil {
			t.Fatal(err)
		}
	}
	shim := "#!/bin/sh\necho run >> '" + w.count + "'\nexec '" + w.bd + "' \"$@\"\n"
	if err := os.WriteFile(w.shim, []byte(shim), 0o700); err != nil {
		t.Fatal(err)
	}
	var rows strings.Builder
	for _, r := range repos {
		path := filepath.Join(root, "src", r)
		w.repos[r] = path
		copyTemplate(t, w, r, path)
		rows.WriteString(testutil.GitaRow(path, r))
	}
	if err := os.WriteFile(filepath.Join(w.gita, "repos.csv"), []byte(rows.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	return w
}

// copyTemplate puts an initialized git repository with a beads database
// of prefix name at path.
func copyTemplate(t *testing.T, w *world, name, path string) {
	t.Helper()
	templates.Lock()
	defer templates.Unlock()
	if templates.dir == "" {
		dir, err := os.MkdirTemp("", "tamq-bd-templates-")
		if err != nil {
			t.Fatal(err)
		}
		templates.dir, templates.made = dir, map[string]bool{}
	}
	src := filepath.Join(templates.dir, name)
	if !templates.made[name] {
		run(t, "", "git", "init", "-q", src)
		w.bdIn(t, src, "init", "--quiet", "--prefix", name, "--non-interactive")
		templates.made[name] = true
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	run(t, "", "cp", "-a", src, path)
}

func TestMain(m *testing.M) {
	code := m.Run()
	if templates.dir != "" {
		os.RemoveAll(templates.dir)
	}
	os.Exit(code)
}

func run(t testing.TB, dir, name string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(name, args...)
	cmd.Dir = dir
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("%s %v: %v\n%s%s", name, args, err, out, stderr)
	}
	return out
}

// bdIn runs the real bd as a person would, in repo.
func (w *world) bdIn(t testing.TB, repo string, args ...string) []byte {
	t.Helper()
	cmd := exec.Command(w.bd, args...)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "BD_NON_INTERACTIVE=1", "BD_DISABLE_METRICS=1", "BEADS_DIR=" + filepath.Join(repo, ".beads")}
	out, err := cmd.Output()
	if err != nil {
		var stderr string
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = string(ee.Stderr)
		}
		t.Fatalf("bd %v in %s: %v\n%s%s", args, repo, err, out, stderr)
	}
	return out
}

func (w *world) driver(t testing.TB) *beads.Driver {
	t.Helper()
	s := config.Beads{Command: w.shim}
	s.NeedsHumanLabels, s.SecretsRequiredLabels, s.DestructiveLabels = config.DefaultBeadsNeedsHuman, config.DefaultBeadsSecrets, config.DefaultBeadsDestructive
	d, err := beads.New(beads.Options{Settings: s, Registry: gita.NewReader(w.gita).Load, Home: filepath.Join(w.home, "engine")})
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// split is a task id's repo path and bd id.
func (w *world) split(t testing.TB, id string) (string, string) {
	t.Helper()
	slug, bdID, err := beads.ParseTaskID(id)
	if err != nil {
		t.Fatal(err)
	}
	return w.repos[slug], bdID
}

type bdIssue struct {
	ID           string   `json:"id"`
	Title        string   `json:"title"`
	Description  string   `json:"description"`
	Status       string   `json:"status"`
	Priority     int      `json:"priority"`
	CloseReason  string   `json:"close_reason"`
	Labels       []string `json:"labels"`
	Dependencies []struct {
		DependsOnID string `json:"depends_on_id"`
		Type        string `json:"type"`
	} `json:"dependencies"`
}

func (w *world) show(t testing.TB, id string) bdIssue {
	t.Helper()
	repo, bdID := w.split(t, id)
	var list []bdIssue
	// bd show --json leaves the dependencies out; bd list has them.
	if err := json.Unmarshal(w.bdIn(t, repo, "list", "--json", "--all", "--limit", "0", "--id", bdID), &list); err != nil || len(list) != 1 {
		t.Fatalf("bd show %s: %v", bdID, err)
	}
	return list[0]
}

func (w *world) AddTask(t testing.TB, repo string, task hubtest.Task) string {
	t.Helper()
	p := task.Priority
	if p == 0 {
		p = 2
	}
	args := []string{"create", task.Title, "-p", strconv.Itoa(p), "--json"}
	if task.Body != "" {
		args = append(args, "-d", task.Body)
	}
	var made bdIssue
	if err := json.Unmarshal(w.bdIn(t, w.repos[repo], args...), &made); err != nil {
		t.Fatal(err)
	}
	id := beads.TaskID(repo, made.ID)
	w.Change(t, id, task)
	return id
}

// gateLabels are the labels a person puts on an issue for the gates.
func gateLabels(task hubtest.Task) []string {
	var out []string
	if task.NeedsHuman {
		out = append(out, "human")
	}
	if task.SecretsRequired {
		out = append(out, "secret")
	}
	if task.Destructive {
		out = append(out, "destructive")
	}
	return out
}

func (w *world) Change(t testing.TB, id string, task hubtest.Task) {
	t.Helper()
	repo, bdID := w.split(t, id)
	now := w.show(t, id)
	if now.Title != task.Title {
		w.bdIn(t, repo, "update", bdID, "--title", task.Title)
	}
	want := gateLabels(task)
	for _, l := range now.Labels {
		if !slices.Contains(want, l) {
			w.bdIn(t, repo, "label", "remove", bdID, l)
		}
	}
	for _, l := range want {
		if !slices.Contains(now.Labels, l) {
			w.bdIn(t, repo, "label", "add", bdID, l)
		}
	}
	var deps []string
	for _, d := range task.DependsOn {
		slug, other, err := beads.ParseTaskID(d)
		if err != nil {
			t.Fatal(err)
		}
		if w.repos[slug] == repo {
			deps = append(deps, other)
		} else {
			deps = append(deps, "external:"+slug+":"+other) // another repo's database, as bd links it
		}
	}
	for _, d := range now.Dependencies {
		if !slices.Contains(deps, d.DependsOnID) {
			w.bdIn(t, repo, "dep", "remove", bdID, d.DependsOnID)
		}
	}
	for _, d := range deps {
		if !slices.ContainsFunc(now.Dependencies, func(x struct {
			DependsOnID string `json:"depends_on_id"`
			Type        string `json:"type"`
		}) bool {
			return x.DependsOnID == d
		}) {
			w.bdIn(t, repo, "dep", "add", bdID, d)
		}
	}
	if s := bdStatus(task.Status); s != now.Status {
		switch {
		case now.Status == "closed":
			w.bdIn(t, repo, "reopen", bdID)
			if s != "open" {
				w.bdIn(t, repo, "update", bdID, "--status", s)
			}
		case s == "closed":
			w.bdIn(t, repo, "close", bdID, "--reason", "closed by a person", "--force")
		default:
			w.bdIn(t, repo, "update", bdID, "--status", s)
		}
	}
}

// bdStatus is the bd status a person sets for a contract status.
func bdStatus(s string) string {
	switch s {
	case "todo", "":
		return "open"
	case "done":
		return "closed"
	case "cancelled":
		return "deferred"
	}
	return s
}

func (w *world) Read(t testing.TB, id string) hubtest.Task {
	t.Helper()
	is := w.show(t, id)
	repo, bdID := w.split(t, id)
	task := hubtest.Task{Title: is.Title, Body: is.Description, Status: map[string]string{"open": "todo", "closed": "done", "deferred": "cancelled"}[is.Status], Note: is.CloseReason}
	if task.Status == "" {
		task.Status = is.Status
	}
	var comments []struct {
		Text string `json:"text"`
	}
	if err := json.Unmarshal(w.bdIn(t, repo, "comments", bdID, "--json"), &comments); err == nil && len(comments) > 0 && task.Note == "" {
		task.Note = comments[len(comments)-1].Text
	}
	return task
}

func (w *world) Unknown(repo string) string { return beads.TaskID(repo, repo+"-zzzzz") }

// Refuse makes every database one others may write: the engine no longer
// trusts what they say.
func (w *world) Refuse(t testing.TB) {
	for _, path := range w.repos {
		if err := os.Chmod(filepath.Join(path, ".beads"), 0o777); err != nil {
			t.Fatal(err)
		}
	}
}

// Down takes bd away from the driver.
func (w *world) Down(t testing.TB) {
	if err := os.Remove(w.shim); err != nil {
		t.Fatal(err)
	}
}

func (w *world) Secret() string { return "" }

// Charged counts the bd processes the driver started.
func (w *world) Charged() int {
	b, _ := os.ReadFile(w.count)
	return strings.Count(string(b), "run\n")
}

func (w *world) Kept(testing.TB) int { return 0 }

// The engine's lease is the one claim of a task: task set in_progress is
// a status in bd, never bd's own claim (an assignee), which is not atomic
// across agents (beads issue #3570).
func TestSetTaskClaimsNothing(t *testing.T) {
	w := newWorld(t, "alpha")
	d := w.driver(t)
	id := w.AddTask(t, "alpha", hubtest.Task{Title: "A", Status: "todo"})
	if _, err := d.Board(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := d.SetTask(t.Context(), id, contract.TaskUpdate{Status: "in_progress", Note: "on it"}); err != nil {
		t.Fatal(err)
	}
	repo, bdID := w.split(t, id)
	var list []struct {
		Status   string `json:"status"`
		Assignee string `json:"assignee"`
	}
	if err := json.Unmarshal(w.bdIn(t, repo, "list", "--json", "--all", "--limit", "0", "--id", bdID), &list); err != nil || len(list) != 1 {
		t.Fatalf("bd list: %v", err)
	}
	if list[0].Status != "in_progress" || list[0].Assignee != "" {
		t.Errorf("after task set in_progress bd has %+v: the engine claimed it in bd", list[0])
	}
}
