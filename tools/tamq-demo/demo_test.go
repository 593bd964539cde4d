package main

import (
	"bufio"
	"bytes"
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/testutil"
	_ "modernc.org/sqlite"
)

func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// demoRun is one demo run as a test sees it.
type demoRun struct {
	// This test's own copies of tamq and coordination-engine, so their
	// processes are told apart.
	tamq, engine string
	cmd          *exec.Cmd
	out          bytes.Buffer // stdout and stderr
	mu           sync.Mutex
	seen         chan string // stdout lines as they come
}

// startDemo starts the demo binary with args; its processes run this test's
// own copy of tamq. If the test fails before the demo cleaned up, whatever it
// left is removed.
func startDemo(t *testing.T, args ...string) *demoRun {
	t.Helper()
	if _, err := exec.LookPath("tmux"); err != nil {
		t.Fatal("the demo needs tmux (CI installs it): ", err)
	}
	bin := testutil.Binaries(t)
	own := t.TempDir()
	r := &demoRun{tamq: filepath.Join(own, "tamq"), engine: filepath.Join(own, "coordination-engine"), seen: make(chan string, 1000)}
	for _, exe := range []string{r.tamq, r.engine} {
		if err := copyFile(filepath.Join(bin, filepath.Base(exe)), exe, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	t.Cleanup(cancel)
	r.cmd = exec.CommandContext(ctx, filepath.Join(bin, "tamq-demo"), append([]string{"--tamq", r.tamq, "--engine", r.engine}, args...)...)
	stdout, err := r.cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	r.cmd.Stderr = writerFunc(func(p []byte) (int, error) {
		r.mu.Lock()
		defer r.mu.Unlock()
		return r.out.Write(p)
	})
	if err := r.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			r.mu.Lock()
			r.out.WriteString(sc.Text() + "\n")
			r.mu.Unlock()
			r.seen <- sc.Text()
		}
		close(r.seen)
	}()
	t.Cleanup(func() {
		if d := r.demo(); d != nil {
			if _, err := os.Stat(d.dir); err == nil {
				d.cleanup()
			}
		}
	})
	return r
}

// wait waits for the demo to exit and returns its exit status.
func (r *demoRun) wait(t *testing.T) int {
	t.Helper()
	for range r.seen { // all of stdout first, then Wait
	}
	err := r.cmd.Wait()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0
}

func (r *demoRun) output() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.out.String()
}

var (
	workspaceRE = regexp.MustCompile(`(?m)^  workspace  (\S+)`)
	tmuxRE      = regexp.MustCompile("`tmux -L ([^`]+)`")
)

// demo is the run's temporary root and tmux server, as the demo printed them
// (nil before it has).
func (r *demoRun) demo() *demo {
	out := r.output()
	w, tm := workspaceRE.FindStringSubmatch(out), tmuxRE.FindStringSubmatch(out)
	if w == nil || tm == nil {
		return nil
	}
	return &demo{runner: runner{workspace: workspace{dir: w[1]}, tamq: r.tamq, engine: r.engine, tmux: tm[1]}, out: io.Discard}
}

// checkGone fails unless everything the demo started has gone: the tmux
// server, the service and every other process of its tamq, the agents, and
// the temporary directory.
func checkGone(t *testing.T, r *demoRun, d *demo) {
	t.Helper()
	if out, err := exec.Command("tmux", "-L", d.tmux, "list-sessions").CombinedOutput(); err == nil {
		t.Errorf("tmux server -L %s still runs:\n%s", d.tmux, out)
	}
	if _, err := os.Stat(d.dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the demo's directory %s is still there (%v)", d.dir, err)
	}
	if runtime.GOOS == "linux" {
		for _, exe := range []string{r.tamq, r.engine, d.agentExe()} {
			if pids := processesOf(exe); len(pids) > 0 {
				t.Errorf("processes of %s still run: %v", exe, pids)
			}
		}
	}
}

// checkOutput checks what the demo prints: the timeline of the loop, the
// two gated tasks and the explanation of B.
func checkOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`(?m)^  \+0\.000s +\S+ +task \S+ +trigger\.observed`),
		regexp.MustCompile(`(?m)^  \+\S+ +beta +task B +lease\.retry_wait +retry_wait +attempt 2, not renewed in time$`),
		regexp.MustCompile(`(?m)^  \+\S+ +beta +task B +lease\.completed +completed +attempt 2`),
		regexp.MustCompile(`(?m)^  \+\S+ +gamma +message m-1 +lease\.completed`),
		regexp.MustCompile(`(?m)^  task H: not woken: stopped at gate human`),
		regexp.MustCompile(`(?m)^  task D: not woken: stopped at gate destructive`),
		regexp.MustCompile(`(?m)^task B: woken \(dependency_satisfied\); lease \S+ completed$`),
		regexp.MustCompile(`(?m)^  depends on A: done \(alpha\)$`),
	} {
		if !want.MatchString(out) {
			t.Errorf("the output lacks %s:\n%s", want, out)
		}
	}
}

func TestDemo(t *testing.T) {
	t.Parallel()
	r := startDemo(t)
	if code := r.wait(t); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, r.output())
	}
	out := r.output()
	checkOutput(t, out)
	d := r.demo()
	if d == nil || !strings.Contains(out, "cleaned up") {
		t.Fatalf("the demo did not say where it worked or that it cleaned up:\n%s", out)
	}
	checkGone(t, r, d)
}

func TestDemoKeep(t *testing.T) {
	t.Parallel()
	r := startDemo(t, "--keep")
	if code := r.wait(t); code != 0 {
		t.Fatalf("demo exit %d:\n%s", code, r.output())
	}
	out := r.output()
	checkOutput(t, out)
	d := r.demo()
	if d == nil {
		t.Fatalf("the demo did not say where it worked:\n%s", out)
	}
	checkFacts(t, d)
	checkKeptLoop(t, d, out)
	// The tmux server, its windows and the service are left for the user,
	// with the commands to use them.
	b, err := exec.Command("tmux", "-L", d.tmux, "list-windows", "-t", "tamq", "-F", "#{window_name}").CombinedOutput()
	if windows := strings.Fields(string(b)); err != nil || !slices.Equal(windows, append(slices.Clone(repos), keptWindows...)) {
		t.Errorf("the tmux server is not left running with the windows: %v\n%s", err, b)
	}
	if _, err := d.call(context.Background(), "tamq", "ping"); err != nil {
		t.Errorf("the service is not left running: %v", err)
	}
	if _, err := d.call(context.Background(), "coordination-engine", "ping"); err != nil {
		t.Errorf("the engine is not left running: %v", err)
	}
	for _, want := range []string{"tmux -L " + d.tmux + " attach", "export XDG_CONFIG_HOME=", "kill-server", "explain B", "top (arrows pick a task", "rm " + d.holdFile("theta")} {
		if !strings.Contains(out, want) {
			t.Errorf("the --keep instructions lack %q:\n%s", want, out)
		}
	}
	if err := d.cleanup(); err != nil {
		t.Fatal(err)
	}
	checkGone(t, r, d)
}

func TestDemoCleansUpWhenInterrupted(t *testing.T) {
	t.Parallel()
	r := startDemo(t)
	// Interrupted once State Hub is seeded: State Hub, both services, the
	// tmux server and the agents all run, and the loop is under way.
	for line := range r.seen {
		if strings.Contains(line, "seeded") {
			break
		}
	}
	if err := r.cmd.Process.Signal(syscall.SIGINT); err != nil {
		t.Fatalf("interrupting the demo: %v\n%s", err, r.output())
	}
	if code := r.wait(t); code != 130 {
		t.Fatalf("demo exit %d, want 130:\n%s", code, r.output())
	}
	out := r.output()
	if !strings.Contains(out, "tamq-demo: interrupted") {
		t.Errorf("no message says the demo was interrupted:\n%s", out)
	}
	d := r.demo()
	if d == nil {
		t.Fatalf("the demo did not say where it worked:\n%s", out)
	}
	checkGone(t, r, d)
}

// checkKeptLoop checks that the loop --keep leaves shows every way a task
// stands, in what the demo printed (coordination-engine tasks, the tmux
// status line) and in tamq top.
func checkKeptLoop(t *testing.T, d *demo, out string) {
	t.Helper()
	_, list, ok := strings.Cut(out, "$ coordination-engine tasks\n")
	if !ok {
		t.Fatalf("the demo did not print the tasks:\n%s", out)
	}
	list, _, _ = strings.Cut(list, "\n\n")
	top, err := d.call(context.Background(), "tamq", "top", "--once")
	if err != nil {
		t.Fatalf("tamq top --once: %v", err)
	}
	for _, k := range append(slices.Clone(keptTasks), loopTasks...) {
		line := regexp.MustCompile(`(?m)^` + k.id + ` +\S+ +\S+ +(.*)$`).FindStringSubmatch(list)
		if line == nil || !strings.Contains(line[1], k.words) {
			t.Errorf("coordination-engine tasks: %s does not stand %q:\n%s", k.id, k.words, list)
		}
		// top's loop pane shows all but what is done.
		row := regexp.MustCompile(`(?m)^    ` + k.id + ` +\S+ +(.*)$`).FindStringSubmatch(string(top))
		if (row != nil) == (k.kind == "done") || row != nil && !strings.Contains(row[1], k.words) {
			t.Errorf("tamq top --once: %s (%s) row %q:\n%s", k.id, k.kind, row, top)
		}
	}
	if !strings.Contains(out, "$ tamq status --tmux-line\n6 need you · 1 working\n") {
		t.Errorf("the tmux status line:\n%s", out)
	}
	for _, want := range []string{"loop: 6 need you · 1 working", "7 windows", "completed 3, retry_wait 1, stopped 1", "statehub: " + "unix://"} {
		if !strings.Contains(string(top), want) {
			t.Errorf("tamq top --once lacks %q:\n%s", want, top)
		}
	}
	if strings.Contains(string(top), "NOT reachable") {
		t.Errorf("tamq top --once shows State Hub unreachable:\n%s", top)
	}
}

type writerFunc func([]byte) (int, error)

func (f writerFunc) Write(p []byte) (int, error) { return f(p) }

// checkFacts checks the loop from what the demo left behind (run with
// --keep): coordination-engine's and tamq's databases and the receipts State
// Hub received, not from printed text. The kept loop goes on meanwhile;
// what it adds is checked where it shows (checkKeptLoop).
func checkFacts(t *testing.T, d *demo) {
	t.Helper()
	open := func(path string) *sql.DB {
		db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { db.Close() })
		return db
	}
	engine, tamq := open(d.engineDB()), open(d.tamqDB())
	type trig struct {
		id, state, gate string
		observed        int64
		leases          []string // "state/attempt"
	}
	triggers := map[string][]trig{} // by task id or message id
	rows, err := engine.Query(`SELECT t.id, COALESCE(t.task_id, t.source_id), t.state, COALESCE(t.gate_reason, ''), t.observed_at,
		COALESCE(l.state || '/' || l.attempt, '') FROM triggers t LEFT JOIN leases l ON l.trigger_id = t.id ORDER BY t.rowid`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var tr trig
		var about, l string
		if err := rows.Scan(&tr.id, &about, &tr.state, &tr.gate, &tr.observed, &l); err != nil {
			t.Fatal(err)
		}
		if l != "" {
			tr.leases = []string{l}
		}
		triggers[about] = append(triggers[about], tr)
	}
	rows.Close()
	one := func(about string) trig {
		t.Helper()
		if len(triggers[about]) != 1 {
			t.Fatalf("%s has %d triggers: %+v", about, len(triggers[about]), triggers[about])
		}
		return triggers[about][0]
	}
	// A: woken once, completed on its first attempt.
	if a := one("A"); a.state != "completed" || !slices.Equal(a.leases, []string{"completed/1"}) {
		t.Errorf("A: %+v", a)
	}
	// B: observed only after A's agent had marked A done (after its
	// checkpoint), and woken a second time once its stalled lease ran out.
	b := one("B")
	if b.state != "completed" || !slices.Equal(b.leases, []string{"completed/2"}) {
		t.Errorf("B: %+v", b)
	}
	var aCheckpoint int64
	if err := engine.QueryRow(`SELECT max(c.recorded_at) FROM checkpoints c JOIN leases l ON l.lease_id = c.lease_id
		WHERE l.trigger_id = ?`, one("A").id).Scan(&aCheckpoint); err != nil || b.observed < aCheckpoint {
		t.Errorf("B observed at %d, before A's work was done (checkpoint %d): %v", b.observed, aCheckpoint, err)
	}
	// The gated tasks: stopped at the right gate, never leased.
	for task, gate := range map[string]string{"H": "human", "D": "destructive"} {
		if g := one(task); g.state != "stopped" || g.gate != gate || len(g.leases) != 0 {
			t.Errorf("%s: %+v, want stopped at %s without a lease", task, g, gate)
		}
	}
	// The message that requests action: woken in gamma, completed.
	if m := one("m-1"); m.state != "completed" || !slices.Equal(m.leases, []string{"completed/1"}) {
		t.Errorf("m-1: %+v", m)
	}
	// tamq: the wake prompts by repo; attempt 2 of B carried its checkpoint;
	// nothing ever went in for the gated tasks.
	wakes := map[string]int{}
	resumed := 0
	rows, err = tamq.Query(`SELECT target_repo, body FROM messages WHERE sender_kind = 'coordination'`)
	if err != nil {
		t.Fatal(err)
	}
	for rows.Next() {
		var repo, body string
		if err := rows.Scan(&repo, &body); err != nil {
			t.Fatal(err)
		}
		wakes[repo]++
		if strings.Contains(body, "attempt 2 of") && strings.Contains(body, "Resume from your latest checkpoint") {
			resumed++
		}
		if strings.Contains(body, "Task H") || strings.Contains(body, "Task D") || strings.Contains(body, "Task S") {
			t.Errorf("a gated task's prompt went to %s", repo)
		}
	}
	rows.Close()
	if wakes["alpha"] != 1 || wakes["beta"] != 2 || wakes["gamma"] != 1 || wakes["zeta"] != 3 || resumed != 1 {
		t.Errorf("wake prompts by repo %v, %d resumed from a checkpoint", wakes, resumed)
	}
	// Every receipt of both programs at State Hub, once: those the kept
	// loop made last are published within moments.
	for _, db := range []*sql.DB{engine, tamq} {
		testutil.WaitFor(t, "every receipt published", func() bool {
			var pending int
			return db.QueryRow(`SELECT count(*) FROM receipts WHERE projected_at IS NULL`).Scan(&pending) == nil && pending == 0
		})
	}
	// The ids published first, then State Hub's data: whatever was marked
	// published before State Hub is read must be there.
	var published []string
	for _, src := range []struct {
		db             *sql.DB
		prefix, ids, n string
	}{
		{engine, "coordination-engine", `SELECT value FROM observer_state WHERE key = 'instance'`, `SELECT id FROM receipts WHERE projected_at IS NOT NULL`},
		{tamq, "tamq", `SELECT value FROM meta WHERE key = 'instance'`, `SELECT id FROM receipts WHERE projected_at IS NOT NULL`},
	} {
		var instance string
		if err := src.db.QueryRow(src.ids).Scan(&instance); err != nil {
			t.Fatal(err)
		}
		rows, err := src.db.Query(src.n)
		if err != nil {
			t.Fatal(err)
		}
		n := 0
		for rows.Next() {
			var id int64
			rows.Scan(&id)
			n++
			published = append(published, fmt.Sprintf("%s:%s:%d", src.prefix, instance, id))
		}
		rows.Close()
		if n == 0 {
			t.Errorf("%s published no receipts", src.prefix)
		}
	}
	var hub struct {
		Progress []struct{ ID string }
	}
	b2, err := os.ReadFile(d.hubData())
	if err != nil || json.Unmarshal(b2, &hub) != nil {
		t.Fatalf("State Hub's data: %v", err)
	}
	received := map[string]int{}
	for _, r := range hub.Progress {
		received[r.ID]++
	}
	for _, id := range published {
		if c := received[id]; c != 1 {
			t.Errorf("receipt %s reached State Hub %d times", id, c)
		}
	}
}
