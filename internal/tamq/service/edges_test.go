package service_test

import (
	"context"
	"database/sql"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// statusOf reads `tamq status --json` (whatever its exit status).
func statusOf(t testing.TB, e *testutil.Env) (api.StatusReport, int) {
	t.Helper()
	r := e.Run(t, "tamq", "status", "--json")
	var st api.StatusReport
	if err := json.Unmarshal([]byte(r.Stdout), &st); err != nil {
		t.Fatalf("status --json: %v\n%s", err, r)
	}
	return st, r.Status
}

// liveStatus asks the running service for its status through the typed
// client, in this process: the tests that poll status this way spawn no
// process per look. A service that does not answer reads as an empty report.
func liveStatus(t testing.TB, e *testutil.Env) api.StatusReport {
	t.Helper()
	st, err := client.New(pathsOf(t, e)).Status(context.Background())
	if err != nil {
		return api.StatusReport{}
	}
	return st
}

// windowStatus is repo's window on a connected endpoint, as status shows it.
func windowStatus(t testing.TB, e *testutil.Env, repo string) (api.Endpoint, api.EndpointWindow) {
	t.Helper()
	st := liveStatus(t, e)
	for _, ep := range st.Endpoints {
		for _, w := range ep.Windows {
			if w.Repo == repo && ep.State == "connected" {
				return ep, w
			}
		}
	}
	t.Fatalf("no connected window for %s in %+v", repo, st.Endpoints)
	return api.Endpoint{}, api.EndpointWindow{}
}

// endpointState is the state of endpoint id as status shows it, "" if absent.
func endpointState(t testing.TB, e *testutil.Env, id string) string {
	t.Helper()
	st := liveStatus(t, e)
	for _, ep := range st.Endpoints {
		if ep.ID == id {
			return ep.State
		}
	}
	return ""
}

// killServer kills a private tmux server and waits for the service to notice
// that endpoint id is gone.
func killServer(t testing.TB, e *testutil.Env, tm *testutil.Tmux, id string) {
	t.Helper()
	tm.Cmd("kill-server")
	testutil.WaitFor(t, "endpoint "+id+" to be disconnected", func() bool { return endpointState(t, e, id) == "disconnected" })
}

// A message for a repo whose agent has exited waits in the queue, saying
// why; the tmux server and every other window live on; the message goes in
// once the repo's window is opened again, its attempt never spent.
func TestMessageForAnExitedAgentWaits(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "alive")
	e.Gita(t, "gone")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", "exit 0", "gone")
	testutil.WaitFor(t, "gone's agent to exit", func() bool {
		_, w := windowStatus(t, e, "gone")
		return !w.Alive
	})
	m := send(t, e, "To:gone: are you there?")
	testutil.WaitFor(t, "the message to say why it waits", func() bool {
		h := stateOf(t, e, m.ID)
		return h.State == "queued" && strings.Contains(h.LastError, "exited")
	})
	if _, w := windowStatus(t, e, "gone"); w.Waiting != 1 || !strings.Contains(w.WaitReason, "exited") {
		t.Errorf("status of gone's window: %+v", w)
	}
	other := send(t, e, "To:alive: still here")
	waitState(t, e, other.ID, "injected")
	if _, err := tm.Cmd("has-session"); err != nil {
		t.Fatal("the tmux server died")
	}

	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "gone")
	got := waitState(t, e, m.ID, "injected")
	if got.Attempts != 1 || got.LastError != "" {
		t.Errorf("delivered after waiting: %+v", got)
	}
	// (It may reach the terminal before the recorder makes it raw, so the
	// line end is not checked.)
	testutil.WaitFor(t, "the reopened window to receive it", func() bool {
		rec, _ := e.Recording("gone")
		return strings.HasPrefix(rec, "From:operator/o: are you there?")
	})
}

// A tmux server that dies is noticed within seconds, with the service
// running on: its endpoint is disconnected, status is unhealthy, sends to
// its repos are refused. When the repo's window comes back on a new server
// on the same socket, the message waiting there moves to it with its id.
func TestGoneTmuxServerIsNoticedAndReplaced(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 2\nretry_backoff_seconds = [1]\n"
	e, tm := workspace(t, cfg, "net-kingdom")
	service := pingPID(t, e)
	old, _ := windowStatus(t, e, "net-kingdom")
	m := send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: before the crash")
	waitState(t, e, m.ID, "awaiting_ack")

	killServer(t, e, tm, old.ID)
	if _, code := statusOf(t, e); code != 8 {
		t.Errorf("status exit %d with its only endpoint gone, want 8", code)
	}
	if r := e.Run(t, "tamq", "send", "To:net-kingdom: nobody there"); r.Status != 8 || !strings.Contains(r.Stderr, "no connected endpoint") {
		t.Errorf("send to a repo whose server is gone: %s", r)
	}

	// What the old window recorded goes, so only the new window's arrivals count.
	if err := os.Remove(filepath.Join(e.Root, "rec", "net-kingdom")); err != nil {
		t.Fatal(err)
	}
	tm.Must(t, "new-session", "-d", "-s", "work")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
	testutil.WaitFor(t, "the waiting message in the new window", func() bool {
		rec, _ := e.Recording("net-kingdom")
		return strings.Contains(rec, "From:operator/o: before the crash\n[tamq message "+m.ID)
	})
	moved := stateOf(t, e, m.ID)
	if moved.EndpointID == old.ID || moved.EndpointID == "" {
		t.Errorf("the message stayed on the gone endpoint: %+v", moved)
	}
	if pingPID(t, e) != service {
		t.Error("the service restarted")
	}
	if _, code := statusOf(t, e); code != 0 {
		t.Errorf("status exit %d after the endpoint was replaced", code)
	}
}

// After a tmux server restart, pane ids are handed out again: a retried
// message of the old server's window must never be written into the pane
// that now has its id, which belongs to another repo.
func TestRetryAfterServerRestartNeverReachesAnotherRepo(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 1\nretry_backoff_seconds = [1]\nmax_attempts = 0\n"
	e, tm := workspace(t, cfg, "alpha")
	e.Gita(t, "beta")
	oldEP, alpha := windowStatus(t, e, "alpha")
	m := send(t, e, "--ack-mode", "acknowledged", "To:alpha: for alpha only")
	waitState(t, e, m.ID, "failed")

	killServer(t, e, tm, oldEP.ID)
	tm.Must(t, "new-session", "-d", "-s", "work")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "beta")
	testutil.WaitFor(t, "beta's recorder", func() bool { _, ok := e.Recording("beta"); return ok })
	if _, beta := windowStatus(t, e, "beta"); beta.PaneID != alpha.PaneID {
		t.Fatalf("beta got pane %s, alpha had %s: the test needs them equal", beta.PaneID, alpha.PaneID)
	}

	e.Tamq(t, "retry", m.ID)
	// It waits: alpha has no window on the live server.
	testutil.WaitFor(t, "the retried message to be queued", func() bool { return stateOf(t, e, m.ID).State == "queued" })
	probe := send(t, e, "To:beta: probe") // delivered after anything wrongly claimed before it
	waitState(t, e, probe.ID, "injected")
	if rec := waitRecorded(t, e, "beta", "probe\r"); strings.Contains(rec, "for alpha only") || rec != "From:operator/o: probe\r" {
		t.Fatalf("beta received %q", rec)
	}
	// alpha's window comes back: the message goes there.
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "alpha")
	testutil.WaitFor(t, "alpha to receive its message", func() bool {
		rec, _ := e.Recording("alpha")
		return strings.HasPrefix(rec, "From:operator/o: for alpha only\n")
	})
	if rec, _ := e.Recording("beta"); strings.Contains(rec, "for alpha only") {
		t.Fatalf("beta received alpha's message: %q", rec)
	}
}

// A repo with windows on two tmux servers needs --endpoint; once one server
// is gone, the other is the only choice.
func TestGoneEndpointDoesNotMakeALiveOneAmbiguous(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom")
	first, _ := windowStatus(t, e, "net-kingdom")
	tm2 := testutil.NewTmux(t)
	e.Tamq(t, "open", "--tmux-socket", tm2.Name, "--command", e.RecorderCommand(), "net-kingdom")
	if r := e.Run(t, "tamq", "send", "To:net-kingdom: which one?"); r.Status != 13 {
		t.Fatalf("send with two live endpoints: %s", r)
	}
	killServer(t, e, tm, first.ID)
	m := send(t, e, "To:net-kingdom: the live one")
	if m.EndpointID == first.ID {
		t.Fatalf("sent through the gone endpoint: %+v", m)
	}
	waitState(t, e, m.ID, "injected")
}

// Concurrent opens of one repo leave one window.
func TestConcurrentOpensLeaveOneWindow(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	var wg sync.WaitGroup
	results := make(chan testutil.Result, 4)
	for range 4 {
		wg.Go(func() {
			results <- e.Run(t, "tamq", "open", "--tmux-socket", tm.Name, "--command", e.RecorderCommand(), "net-kingdom")
		})
	}
	wg.Wait()
	close(results)
	for r := range results {
		if r.Status != 0 {
			t.Errorf("open: %s", r)
		}
	}
	marked := tm.Must(t, "list-windows", "-a", "-F", "#{window_name}:#{@tamq_repo}")
	if n := strings.Count(marked, "net-kingdom:net-kingdom"); n != 1 {
		t.Errorf("%d windows for net-kingdom:\n%s", n, marked)
	}
}

// `tamq send … && tamq stop`: a delivery under way when the stop comes
// finishes within the grace period and is recorded as what it was.
func TestStopDuringADeliveryKeepsItsOutcome(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, "[delivery]\nenter_pause_ms = 1500\n", "net-kingdom")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "--command", bracketedAgent(e), "net-kingdom")
	testutil.WaitFor(t, "the broker to attach", func() bool { return brokersAttached(t, e) == 1 })
	waitBracketed(t, e, tm, "net-kingdom")
	m := send(t, e, "To:net-kingdom: arrives whole")
	testutil.WaitFor(t, "the delivery to start", func() bool { return stateOf(t, e, m.ID).State == "delivering" })
	e.Tamq(t, "stop")
	// The service is down: history reads the database itself.
	if got := stateOf(t, e, m.ID); got.State != "injected" {
		t.Fatalf("after stop: %+v", got)
	}
	if rec, _ := e.Recording("net-kingdom"); rec != "\x1b[200~From:operator/o: arrives whole\x1b[201~\r" {
		t.Errorf("received %q", rec)
	}
}

// Every receipt names the policy profile and config version in force.
func TestReceiptsCarryProfileAndConfigVersion(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom")
	ep, _ := windowStatus(t, e, "net-kingdom")
	m := send(t, e, "To:net-kingdom: counted")
	waitState(t, e, m.ID, "injected")
	e.Run(t, "tamq", "send", "To:nowhere: refused")
	killServer(t, e, tm, ep.ID)
	e.Tamq(t, "stop")
	db, err := sql.Open("sqlite", "file:"+e.Database()+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query(`SELECT kind, COALESCE(policy_profile, ''), COALESCE(config_version, '') FROM receipts`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	kinds := map[string]bool{}
	for rows.Next() {
		var kind, profile, version string
		if err := rows.Scan(&kind, &profile, &version); err != nil {
			t.Fatal(err)
		}
		kinds[kind] = true
		if !strings.HasPrefix(profile, "default@") || len(version) != 12 {
			t.Errorf("receipt %s: profile %q, config version %q", kind, profile, version)
		}
	}
	for _, k := range []string{"service.start", "endpoint.register", "endpoint.state", "message.transition", "message.rejected", "service.shutdown"} {
		if !kinds[k] {
			t.Errorf("no %s receipt among %v", k, kinds)
		}
	}
}

// `tamq endpoints` lists the endpoints; one whose server is gone can be
// forgotten (its undelivered messages fail), a connected one cannot.
func TestEndpointsListAndForget(t *testing.T) {
	t.Parallel()
	cfg := fastConfig + "[coordination]\nwake_ack_timeout_seconds = 30\n"
	e, tm := workspace(t, cfg, "net-kingdom")
	gone, _ := windowStatus(t, e, "net-kingdom")
	m := send(t, e, "--ack-mode", "acknowledged", "To:net-kingdom: unacked")
	waitState(t, e, m.ID, "awaiting_ack")
	tm2 := testutil.NewTmux(t)
	e.Gita(t, "railiance")
	e.Tamq(t, "open", "--tmux-socket", tm2.Name, "--command", e.RecorderCommand(), "railiance")
	live, _ := windowStatus(t, e, "railiance")
	killServer(t, e, tm, gone.ID)

	list := func(args ...string) []api.Endpoint {
		var eps []api.Endpoint
		r := e.Tamq(t, append([]string{"endpoints", "--json"}, args...)...)
		if err := json.Unmarshal([]byte(r.Stdout), &eps); err != nil {
			t.Fatalf("endpoints --json: %v\n%s", err, r)
		}
		return eps
	}
	if eps := list(); len(eps) != 2 {
		t.Fatalf("endpoints: %+v", eps)
	}
	if r := e.Run(t, "tamq", "endpoints", "forget", live.ID); r.Status != errs.ExitStatus(errs.Conflict) {
		t.Errorf("forget a connected endpoint: %s", r)
	}
	if r := e.Run(t, "tamq", "endpoints", "forget", "tmux-amq-0"); r.Status != errs.ExitStatus(errs.NotFound) {
		t.Errorf("forget an unknown endpoint: %s", r)
	}
	r := e.Tamq(t, "endpoints", "forget", gone.ID)
	if !strings.Contains(r.Stdout, "1 undelivered messages failed") {
		t.Errorf("forget: %s", r)
	}
	if got := stateOf(t, e, m.ID); got.State != "failed" || !strings.Contains(got.LastError, "forgotten") {
		t.Errorf("message of the forgotten endpoint: %+v", got)
	}
	if eps := list(); len(eps) != 1 || eps[0].ID != live.ID {
		t.Errorf("endpoints after forget: %+v", eps)
	}
	if eps := list("--all"); len(eps) != 2 {
		t.Errorf("endpoints --all: %+v", eps)
	}
	if _, code := statusOf(t, e); code != 0 {
		t.Errorf("status exit %d once the gone endpoint is forgotten", code)
	}
}

// `tamq start` brings back the windows of the tmux server it is told to,
// not of every socket ever used.
func TestStartRestoresOnlyTheChosenSocketsWhenGone(t *testing.T) {
	t.Parallel()
	e, wanted := workspace(t, fastConfig, "alpha")
	other := testutil.NewTmux(t)
	e.Gita(t, "beta")
	e.Tamq(t, "open", "--tmux-socket", other.Name, "--command", e.RecorderCommand(), "beta")
	e.Tamq(t, "stop")
	wanted.Cmd("kill-server")
	other.Cmd("kill-server")
	e.Tamq(t, "start", "--detach", "--tmux-socket", wanted.Name)
	if _, err := wanted.Cmd("has-session", "-t", "=tamq"); err != nil {
		t.Errorf("the chosen server was not brought back: %v", err)
	}
	if out, err := other.Cmd("list-sessions"); err == nil {
		t.Errorf("a server that was not asked for was started: %s", out)
	}
	testutil.WaitFor(t, "alpha's restored recorder", func() bool { _, ok := e.Recording("alpha"); return ok })
	m := send(t, e, "To:alpha: back")
	waitState(t, e, m.ID, "injected")
}

// A broker session is believed only from the process running in the pane it
// names: anyone else claiming a window's pane is refused.
func TestBrokerSessionFromOutsideThePaneIsRefused(t *testing.T) {
	t.Parallel()
	e, tm := workspace(t, fastConfig, "net-kingdom")
	_, w := windowStatus(t, e, "net-kingdom")
	client := &unixrpc.Client{Socket: e.Socket()}
	conn, _, err := unixrpc.OpenStream(context.Background(), client, api.OpBrokerSession,
		api.BrokerSessionArgs{Repo: "net-kingdom", Socket: tmuxSocketPath(t, tm), Pane: w.PaneID})
	if err == nil {
		conn.Close()
		t.Fatal("a broker session from outside the pane was accepted")
	}
	if !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("refusal: %v", err)
	}
}

// status says when the config file changed since the service started (a
// restart applies it), and reports a bad config file with exit status 3
// while still showing the rest.
func TestStatusReportsConfigChangesAndErrors(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	st, code := statusOf(t, e)
	if code != 0 || st.Config.Stale || st.Config.Version != st.Service.ConfigVersion {
		t.Fatalf("status with the file unchanged: exit %d, %+v / %s", code, st.Config, st.Service.ConfigVersion)
	}
	e.WriteConfig(t, fastConfig+"[coordination]\nmax_attempts = 2\n")
	st, code = statusOf(t, e)
	if code != 0 || !st.Config.Stale || st.Config.Version == st.Service.ConfigVersion {
		t.Errorf("status after the file changed: exit %d, %+v", code, st.Config)
	}
	if r := e.Run(t, "tamq", "status"); !strings.Contains(r.Stdout, "CHANGED since the service started") {
		t.Errorf("status text after the file changed:\n%s", r.Stdout)
	}
	e.WriteConfig(t, "[coordination]\nmax_attempts = 99\n")
	st, code = statusOf(t, e)
	if code != 3 || !strings.Contains(st.Config.Error, "max_attempts") || !st.Service.Running || len(st.Endpoints) != 1 {
		t.Errorf("status with a bad config file: exit %d, %+v", code, st)
	}
}

// A window without a broker gets the same care: tmux shows its screen, and
// nothing is written while a dialog shows there; once it is answered the
// message goes in.
func TestNoEnterIntoADialogThroughTmux(t *testing.T) {
	t.Parallel()
	e, tm := emptyWorkspace(t, fastConfig, "net-kingdom")
	rec := filepath.Join(e.Root, "rec")
	agent := `printf 'Choose how to sign in.\n\n> 1. Sign in with a browser\n  2. Use a key\n\nPress enter to continue\n'; ` +
		`read answer; printf '%s' "$answer" > "` + rec + `/answer"; clear; stty raw -echo; exec cat > "` + rec + `/$TAMQ_REPO"`
	e.Tamq(t, "open", "--no-service", "--tmux-socket", tm.Name, "--command", agent, "net-kingdom")
	e.Tamq(t, "open", "--tmux-socket", tm.Name, "net-kingdom")
	_, w := windowStatus(t, e, "net-kingdom")
	testutil.WaitFor(t, "the dialog", func() bool {
		out, _ := tm.Cmd("capture-pane", "-p", "-t", w.PaneID)
		return strings.Contains(string(out), "Press enter to continue")
	})
	m := send(t, e, "To:net-kingdom: not into the menu")
	testutil.WaitFor(t, "the delivery to wait", func() bool {
		return strings.Contains(stateOf(t, e, m.ID).LastError, "not at its prompt: a dialog shows")
	})
	if _, err := os.Stat(filepath.Join(rec, "answer")); !os.IsNotExist(err) {
		t.Fatalf("the dialog was answered: %v", err)
	}
	tm.Must(t, "send-keys", "-t", w.PaneID, "-l", "2")
	tm.Must(t, "send-keys", "-t", w.PaneID, "Enter")
	got := waitState(t, e, m.ID, "injected")
	if b, _ := os.ReadFile(filepath.Join(rec, "answer")); string(b) != "2" || got.Attempts != 1 {
		t.Errorf("answer %q, message %+v", b, got)
	}
	testutil.WaitFor(t, "the message in the agent", func() bool {
		r, _ := e.Recording("net-kingdom")
		return strings.HasPrefix(r, "From:operator/o: not into the menu")
	})
}

// A config file that is invalid (the user is editing it) never keeps an
// agent from starting: the broker runs it with the defaults and says so.
func TestBrokerRunsTheAgentWithABadConfig(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	e.WriteConfig(t, "[coordination]\nmax_attempts = 99\n")
	r := e.Run(t, "tamq", "broker", "--repo", "net-kingdom", "--exit-wait", "0s", "--", "sh", "-c", "echo agent-ran; exit 7")
	if r.Status != 7 || !strings.Contains(r.Stdout, "agent-ran") || !strings.Contains(r.Stdout, "the broker uses the defaults") {
		t.Errorf("broker with a bad config: %s", r)
	}
}

// A tmux server that stops answering (hung) is as good as gone for
// deliveries; when it answers again its endpoint is connected again.
func TestHungTmuxServerIsDisconnectedUntilItAnswers(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	ep, _ := windowStatus(t, e, "net-kingdom")
	syscall.Kill(ep.ServerPID, syscall.SIGSTOP)
	defer syscall.Kill(ep.ServerPID, syscall.SIGCONT)
	testutil.WaitFor(t, "the hung server's endpoint to be disconnected", func() bool { return endpointState(t, e, ep.ID) == "disconnected" })
	syscall.Kill(ep.ServerPID, syscall.SIGCONT)
	testutil.WaitFor(t, "the endpoint to be connected again", func() bool { return endpointState(t, e, ep.ID) == "connected" })
	m := send(t, e, "To:net-kingdom: back")
	waitState(t, e, m.ID, "injected")
}
