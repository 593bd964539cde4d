package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"

	_ "modernc.org/sqlite"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/proc"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

func TestMain(m *testing.M) {
	testutil.MoreParallel(8)
	code := m.Run()
	testutil.RemoveBinaries()
	removeGeneratedHistory()
	os.Exit(code)
}

// nobody is the uid tests use for "another user".
const nobody = 65534

func pingPID(t *testing.T, e *testutil.Env) int {
	t.Helper()
	r := e.Tamq(t, "ping", "--json")
	var res daemon.PingResult
	if err := json.Unmarshal([]byte(r.Stdout), &res); err != nil {
		t.Fatalf("ping --json: %v\n%s", err, r.Stdout)
	}
	return res.PID
}

func startDetached(t *testing.T, e *testutil.Env) int {
	t.Helper()
	e.Tamq(t, "start", "--detach")
	pid := pingPID(t, e)
	t.Cleanup(func() {
		syscall.Kill(pid, syscall.SIGKILL)
	})
	return pid
}

func receipts(t *testing.T, e *testutil.Env, kind string) []map[string]any {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+e.Database()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT status, COALESCE(reason, ''), COALESCE(subject_id, ''), COALESCE(detail, '{}') FROM receipts WHERE kind = ? ORDER BY id`, kind)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []map[string]any
	for rows.Next() {
		var status, reason, subject, detail string
		if err := rows.Scan(&status, &reason, &subject, &detail); err != nil {
			t.Fatal(err)
		}
		m := map[string]any{}
		if err := json.Unmarshal([]byte(detail), &m); err != nil {
			t.Fatal(err)
		}
		m["status"], m["reason"], m["subject_id"] = status, reason, subject
		out = append(out, m)
	}
	return out
}

func TestPingStatusStop(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)

	r := e.Run(t, "tamq", "ping")
	if r.Status != 8 || !strings.Contains(r.Stderr, "not running") {
		t.Fatalf("ping while down: %s", r)
	}
	r = e.Run(t, "tamq", "status", "--json")
	if r.Status != 8 {
		t.Fatalf("status while down: %s", r)
	}
	var down api.StatusReport
	if err := json.Unmarshal([]byte(r.Stdout), &down); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r.Stdout)
	}
	if down.Service.Running || down.Healthy || down.SQLite.Exists || down.Service.Socket != e.Socket() {
		t.Errorf("down report: %+v", down)
	}
	if _, err := os.Stat(e.State); !os.IsNotExist(err) {
		t.Errorf("status while down created the state dir: %v", err)
	}

	tm := testutil.NewTmux(t)
	pid := startDetached(t, e)
	if fi, err := os.Stat(e.Socket()); err != nil || fi.Mode().Perm() != 0o600 || fi.Mode()&os.ModeSocket == 0 {
		t.Fatalf("socket: %v %v", fi.Mode(), err)
	}
	if fi, err := os.Stat(filepath.Join(e.TamqState(), "tamq.log")); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("log file: %v", err)
	}

	r = e.Run(t, "tamq", "status", "--json")
	var up api.StatusReport
	if err := json.Unmarshal([]byte(r.Stdout), &up); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	if !up.Service.Running || up.Service.PID != pid || up.SQLite.SchemaVersion != sqlitedb.LatestVersion(store.Migrations) || !up.SQLite.Exists {
		t.Errorf("up report: %+v", up)
	}
	// No gita registry in this environment: unhealthy, with the registry's exit status.
	if r.Status != 4 || up.Healthy || up.Registry.Error == "" {
		t.Errorf("status without registry: %s", r)
	}
	if len(up.Queue.Counts) != len(store.MessageStates) {
		t.Errorf("queue counts %v", up.Queue.Counts)
	}
	human := e.Run(t, "tamq", "status")
	flat := strings.Join(strings.Fields(human.Stdout), " ")
	for _, want := range []string{"service running, pid " + strconv.Itoa(pid), "sqlite", "registry ERROR", "statehub", "queue", "leases", "endpoints none"} {
		if !strings.Contains(flat, want) {
			t.Errorf("status output lacks %q:\n%s", want, human.Stdout)
		}
	}

	r = e.Tamq(t, "stop")
	if !strings.Contains(r.Stdout, "tamq stopped (pid "+strconv.Itoa(pid)+")") {
		t.Errorf("stop: %s", r)
	}
	if _, err := os.Stat(e.Socket()); !os.IsNotExist(err) {
		t.Errorf("socket left behind: %v", err)
	}
	if !proc.Exited(pid) {
		t.Errorf("service pid %d still exists", pid)
	}
	// Only the service stopped: the tmux server and its window live on.
	if out := tm.Must(t, "list-windows", "-t", "work", "-F", "#{window_name}"); out == "" {
		t.Error("tmux window gone after stop")
	}
	r = e.Run(t, "tamq", "stop")
	if r.Status != 0 || !strings.Contains(r.Stdout, "not running") {
		t.Errorf("second stop: %s", r)
	}
	if got := receipts(t, e, "service.shutdown"); len(got) != 1 || got[0]["reason"] != "stop request" {
		t.Errorf("shutdown receipts %v", got)
	}
}

func TestConcurrentStartsLeaveOneService(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	const n = 20
	var wg sync.WaitGroup
	results := make([]testutil.Result, n)
	for i := range n {
		wg.Add(1)
		go func() {
			defer wg.Done()
			results[i] = e.Run(t, "tamq", "start", "--detach", "--json")
		}()
	}
	wg.Wait()
	pids := map[int]int{}
	started := 0
	for _, r := range results {
		if r.Status != 0 {
			t.Fatalf("start: %s", r)
		}
		var rec struct {
			PID            int  `json:"pid"`
			AlreadyRunning bool `json:"already_running"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &rec); err != nil {
			t.Fatalf("start --json: %v\n%s", err, r)
		}
		pids[rec.PID]++
		if !rec.AlreadyRunning {
			started++
		}
	}
	if len(pids) != 1 || started != 1 {
		t.Fatalf("pids %v, %d starts reported starting a service", pids, started)
	}
	var pid int
	for p := range pids {
		pid = p
	}
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	if got := servicesRunning(t, e); len(got) != 1 || got[0] != pid {
		t.Fatalf("tamq serve processes: %v, want [%d]", got, pid)
	}
	e.Tamq(t, "stop")
	if got := servicesRunning(t, e); len(got) != 0 {
		t.Fatalf("processes left after stop: %v", got)
	}
}

// servicesRunning lists the pids of processes running this test's tamq binary
// as a service.
func servicesRunning(t *testing.T, e *testutil.Env) []int {
	t.Helper()
	bin := filepath.Join(e.Bin, "tamq")
	procs, _ := filepath.Glob("/proc/[0-9]*")
	var out []int
	for _, p := range procs {
		exe, err := os.Readlink(p + "/exe")
		if err != nil || exe != bin {
			continue
		}
		cmdline, _ := os.ReadFile(p + "/cmdline")
		environ, _ := os.ReadFile(p + "/environ")
		if strings.Contains(string(cmdline), "serve") && strings.Contains(string(environ), "XDG_STATE_HOME="+e.State+"\x00") {
			pid, _ := strconv.Atoi(filepath.Base(p))
			out = append(out, pid)
		}
	}
	return out
}

func TestSignalsShutDownCleanly(t *testing.T) {
	t.Parallel()
	for _, sig := range []syscall.Signal{syscall.SIGTERM, syscall.SIGINT} {
		name := map[syscall.Signal]string{syscall.SIGTERM: "SIGTERM", syscall.SIGINT: "SIGINT"}[sig]
		t.Run(name, func(t *testing.T) {
			t.Parallel()
			e := testutil.NewEnv(t)
			cmd := e.Command(context.Background(), "tamq", "serve")
			var stderr strings.Builder
			cmd.Stderr = &stderr
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { cmd.Process.Kill() })
			testutil.WaitFor(t, "the service to answer", func() bool {
				return e.Run(t, "tamq", "ping").Status == 0
			})
			if err := cmd.Process.Signal(sig); err != nil {
				t.Fatal(err)
			}
			if err := cmd.Wait(); err != nil {
				t.Fatalf("serve exited with %v after %s\n%s", err, name, stderr.String())
			}
			if _, err := os.Stat(e.Socket()); !os.IsNotExist(err) {
				t.Errorf("socket left after %s: %v", name, err)
			}
			got := receipts(t, e, "service.shutdown")
			if len(got) != 1 || got[0]["reason"] != name || got[0]["status"] != "stopped" || got[0]["grace_exceeded"] != false {
				t.Errorf("shutdown receipts %v", got)
			}
			if !strings.Contains(stderr.String(), "tamq service stopped") {
				t.Errorf("serve did not log its stop:\n%s", stderr.String())
			}
			// The state survives for the next start.
			e.Tamq(t, "start", "--detach")
			pid := pingPID(t, e)
			e.Tamq(t, "stop")
			if !proc.Exited(pid) {
				t.Errorf("restarted service %d still alive", pid)
			}
		})
	}
}

// snapshot records the names, sizes and modification times below dir.
func snapshot(t *testing.T, dir string) map[string]string {
	t.Helper()
	out := map[string]string{}
	filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return nil
		}
		out[path] = fi.Mode().String() + " " + strconv.FormatInt(fi.Size(), 10) + " " + fi.ModTime().String()
		return nil
	})
	return out
}

func sameSnapshot(t *testing.T, before, after map[string]string) {
	t.Helper()
	for p, v := range before {
		if after[p] != v {
			t.Errorf("%s changed: %q -> %q", p, v, after[p])
		}
	}
	for p := range after {
		if _, ok := before[p]; !ok {
			t.Errorf("%s appeared", p)
		}
	}
}

func TestStartFailuresChangeNothing(t *testing.T) {
	t.Parallel()
	t.Run("socket owned by another user", func(t *testing.T) {
		t.Parallel()
		e := testutil.NewEnv(t)
		// A database with history from an earlier run.
		e.Tamq(t, "start", "--detach")
		e.Tamq(t, "stop")
		ln, err := net.Listen("unix", e.Socket())
		if err != nil {
			t.Fatal(err)
		}
		ln.(*net.UnixListener).SetUnlinkOnClose(false)
		ln.Close()
		if err := os.Chown(e.Socket(), nobody, nobody); err != nil {
			t.Fatal(err)
		}
		before := snapshot(t, e.Root)
		for _, args := range [][]string{{"start", "--detach"}, {"serve"}, {"start"}} {
			r := e.Run(t, "tamq", args...)
			if r.Status != 9 || !strings.Contains(r.Stderr, "owned by uid 65534") {
				t.Errorf("tamq %v: %s", args, r)
			}
		}
		after := snapshot(t, e.Root)
		// The start lock and log are the starter's own files; everything else,
		// the database above all, is untouched.
		delete(after, filepath.Join(e.TamqState(), "tamq.log"))
		delete(before, filepath.Join(e.TamqState(), "tamq.log"))
		delete(after, filepath.Join(e.TamqState(), "start.lock"))
		delete(before, filepath.Join(e.TamqState(), "start.lock"))
		sameSnapshot(t, before, after)
	})
	t.Run("state dir not writable", func(t *testing.T) {
		t.Parallel()
		e := testutil.NewEnv(t)
		e.StateHubInEnvironment(t)
		// Root ignores permission bits, so run tamq as another user whose state
		// dir belongs to root.
		for _, d := range []string{e.TamqState(), e.Runtime} {
			if err := os.MkdirAll(d, 0o755); err != nil {
				t.Fatal(err)
			}
		}
		os.Chmod(e.State, 0o755)
		if err := os.Chown(e.Runtime, nobody, nobody); err != nil {
			t.Fatal(err)
		}
		os.Chmod(e.Runtime, 0o700)
		before := snapshot(t, e.Root)
		for _, args := range [][]string{{"start", "--detach"}, {"serve"}} {
			cmd := e.Command(context.Background(), "tamq", args...)
			cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
			r := testutil.RunCmd(t, cmd)
			if r.Status != 6 || !strings.Contains(r.Stderr, e.TamqState()) || !strings.Contains(r.Stderr, "permission denied") {
				t.Errorf("tamq %v as nobody: %s", args, r)
			}
		}
		sameSnapshot(t, before, snapshot(t, e.Root))
	})
}

func TestOtherUsersAreRefused(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	startDetached(t, e)
	// Open the socket's file permissions, so that only the peer-credential check
	// stands between another user and the service.
	os.Chmod(e.Runtime, 0o755)
	os.Chmod(e.Socket(), 0o666)
	// tamq's own client would refuse a socket of another user: a raw one.
	cmd := e.Command(context.Background(), "squatter", "dial", e.Socket())
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: &syscall.Credential{Uid: nobody, Gid: nobody}}
	r := testutil.RunCmd(t, cmd)
	if r.Status != 0 || r.Stdout != "closed\n" {
		t.Errorf("ping as another uid: %s", r)
	}
	got := receipts(t, e, "auth.refused")
	if len(got) != 1 || got[0]["peer_uid"] != float64(nobody) || got[0]["status"] != "refused" {
		t.Errorf("auth receipts %v", got)
	}
	// The service still serves its own user.
	e.Tamq(t, "ping")
	e.Tamq(t, "stop")
}

func TestOrwell(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	r := e.Run(t, "tamq", "serve", "--orwell")
	if r.Status != 14 || !strings.Contains(r.Stderr, "--orwell is refused by policy profile default@") {
		t.Errorf("orwell under the default profile: %s", r)
	}
	r = e.Run(t, "tamq", "start", "--detach", "--orwell")
	if r.Status != 14 {
		t.Errorf("start --detach --orwell under the default profile: %s", r)
	}
	if _, err := os.Stat(filepath.Join(e.TamqState(), "orwell.log")); !os.IsNotExist(err) {
		t.Errorf("refused orwell created its sink: %v", err)
	}

	e.WriteConfig(t, "[policy]\nprofile = \"diagnose\"\n[policy.profiles.diagnose]\nallow = [\"statehub_read\", \"orwell_diagnostics\"]\n")
	r = e.Run(t, "tamq", "start", "--detach", "--orwell")
	if r.Status != 0 || !strings.Contains(r.Stderr, "WARNING: --orwell is on") {
		t.Fatalf("start --orwell: %s", r)
	}
	pid := pingPID(t, e)
	t.Cleanup(func() { syscall.Kill(pid, syscall.SIGKILL) })
	e.Tamq(t, "stop")
	sink := filepath.Join(e.TamqState(), "orwell.log")
	fi, err := os.Stat(sink)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("orwell sink: %v %v", fi, err)
	}
	b, _ := os.ReadFile(sink)
	if !strings.Contains(string(b), `"op":"ping"`) || !strings.Contains(string(b), `"op":"shutdown"`) {
		t.Errorf("orwell sink lacks the frames:\n%s", b)
	}
	logb, _ := os.ReadFile(filepath.Join(e.TamqState(), "tamq.log"))
	if strings.Contains(string(logb), `"op":"ping"`) {
		t.Errorf("frames leaked into the ordinary log:\n%s", logb)
	}
}

func TestStaleSocketIsReplacedAndForeignFileKept(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	os.MkdirAll(e.Runtime, 0o700)
	// A stale socket of ours: nobody listens.
	ln, err := net.Listen("unix", e.Socket())
	if err != nil {
		t.Fatal(err)
	}
	ln.(*net.UnixListener).SetUnlinkOnClose(false)
	ln.Close()
	startDetached(t, e)
	e.Tamq(t, "stop")

	// A regular file where the socket belongs is never removed.
	os.WriteFile(e.Socket(), []byte("keep me"), 0o600)
	r := e.Run(t, "tamq", "start", "--detach")
	if r.Status != 13 || !strings.Contains(r.Stderr, "is not a socket") {
		t.Errorf("start over a regular file: %s", r)
	}
	if b, _ := os.ReadFile(e.Socket()); string(b) != "keep me" {
		t.Error("the file at the socket path was changed")
	}

	// A second service on the same socket is refused while the first listens.
	os.Remove(e.Socket())
	startDetached(t, e)
	other := append([]string{}, e.Vars...)
	other = append(other, "TAMQ_STATE_DIR="+filepath.Join(e.Root, "other-state"))
	cmd := e.Command(context.Background(), "tamq", "serve")
	cmd.Env = other
	r = testutil.RunCmd(t, cmd)
	if r.Status != 21 || !strings.Contains(r.Stderr, "already listening") {
		t.Errorf("second service on one socket: %s", r)
	}
	e.Tamq(t, "ping")
	e.Tamq(t, "stop")
}

var _ = exec.Command
