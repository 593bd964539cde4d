package service

import (
	"bytes"
	"context"
	"database/sql"
	"log/slog"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lockfile"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/broker"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func TestHistoryAdvisoryText(t *testing.T) {
	since := time.Date(2026, 3, 4, 23, 0, 0, 0, time.UTC)
	if got := HistoryAdvisory(100_000_000, since, AdvisoryLimit); got != "" {
		t.Errorf("at the limit: %q", got)
	}
	want := "Size of history is 123 MB since 260304, exceeding 100MB. Consider using 'tamq purge'."
	if got := HistoryAdvisory(123_456_789, since, AdvisoryLimit); got != want {
		t.Errorf("got  %q\nwant %q", got, want)
	}
}

// setup starts an in-process service on private paths.
func setup(t *testing.T, o Options) (*Service, paths.Paths) {
	t.Helper()
	return setupIn(t, t.TempDir(), o)
}

// setupIn starts an in-process service with its files under root.
func setupIn(t testing.TB, root string, o Options) (*Service, paths.Paths) {
	t.Helper()
	env := map[string]string{"HOME": root, "XDG_STATE_HOME": filepath.Join(root, "state"), "XDG_RUNTIME_DIR": filepath.Join(root, "run")}
	p, err := paths.Resolve(paths.Tamq, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	return startAt(t, p, o)
}

func TestAdvisoryAtStartAndCleanShutdown(t *testing.T) {
	t.Parallel()
	// Seed a database with a little history and a connected endpoint (a real
	// tmux server, so the service's watcher keeps it connected).
	svc, p := setup(t, Options{})
	ctx := context.Background()
	tm := testutil.NewTmux(t)
	socket := tm.Must(t, "display", "-p", "#{socket_path}")
	pid := tm.Must(t, "display", "-p", "#{pid}")
	err := svc.db.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state, max_attempts,
				policy_profile, config_version, created_at, updated_at)
				VALUES ('m', 'b', 'operator', 'operator', 'r', 'hello', 'injected', 'queued', 4, 'p', 'c', 1772668800000, 1772668800000)`); err != nil {
			return err
		}
		_, err := tx.Exec(`INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
				VALUES (?, ?, ?, 's', 'connected', 1, 1)`, "tmux-amq-"+pid, socket, pid)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	var ping daemon.PingResult
	if err := (&unixrpc.Client{Socket: p.Socket}).Call(ctx, daemon.OpPing, nil, &ping); err != nil {
		t.Fatal(err)
	}
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// Restart with a tiny advisory limit: the advisory names size and date.
	var notices bytes.Buffer
	svc2, _ := startAt(t, p, Options{Notices: &notices, AdvisoryLimit: 1})
	if got := notices.String(); !strings.HasPrefix(got, "Size of history is 0 MB since 260305, exceeding 0MB. Consider using 'tamq purge'.") {
		t.Errorf("advisory %q", got)
	}
	var state string
	// Marked disconnected at shutdown (the receipt below says so), then
	// connected again by the new start: its tmux server still runs.
	if err := svc2.db.Reader.QueryRow(`SELECT state FROM endpoints`).Scan(&state); err != nil || state != "connected" {
		t.Errorf("endpoint state after the restart: %q %v", state, err)
	}
	var queued int
	svc2.db.Reader.QueryRow(`SELECT count(*) FROM messages WHERE state = 'queued'`).Scan(&queued)
	if queued != 1 {
		t.Errorf("queued messages after restart: %d", queued)
	}
	rs, err := store.Receipts(ctx, svc2.db.Reader, "service.shutdown")
	if err != nil || len(rs) != 1 || rs[0].Reason != "signal" || rs[0].Detail["endpoints_disconnected"] != float64(1) {
		t.Errorf("shutdown receipts %+v %v", rs, err)
	}
	ctx2, stop2 := context.WithCancelCause(ctx)
	done2 := make(chan error, 1)
	go func() { done2 <- svc2.Run(ctx2) }()
	stop2(errSIGTERM)
	if err := <-done2; err != nil {
		t.Fatal(err)
	}
	db, err := sqlitedb.OpenReadOnly(ctx, p.Database, sqlitedb.LatestVersion(store.Migrations), time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rs, _ = store.Receipts(ctx, db, "service.shutdown")
	if len(rs) != 2 || rs[1].Reason != "SIGTERM" {
		t.Errorf("second shutdown receipt %+v", rs)
	}
}

type sigErr string

func (e sigErr) Error() string { return string(e) }

const errSIGTERM = sigErr("SIGTERM")

// startAt starts a service on the given paths.
func startAt(t testing.TB, p paths.Paths, o Options) (*Service, paths.Paths) {
	t.Helper()
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.StateHub.APIBase == config.DefaultStateHubAPIBase {
		// Never the default address, where the user's own State Hub may
		// listen: the test's runtime directory, where none does.
		cfg.StateHub.APIBase = config.ReferenceStateHubAPIBase(p)
	}
	o.Paths, o.Config = p, cfg
	rd := gita.NewReader(filepath.Join(filepath.Dir(p.StateDir), "gita"))
	o.Registry, o.Addresses = rd.Load, rd.Watched
	svc, err := Start(context.Background(), o)
	// A service of this very process that just stopped released its lock,
	// but a child another test forked at that moment may hold a copy of the
	// descriptor until it execs: the lock is free again a moment later.
	for errs.Is(err, errs.AlreadyRunning) && lockfile.HolderPID(p.LockFile) == os.Getpid() {
		testutil.WaitFor(t, "the lock of the stopped service", func() bool {
			l, lerr := lockfile.TryLock(p.LockFile)
			l.Release()
			return lerr == nil
		})
		svc, err = Start(context.Background(), o)
	}
	if err != nil {
		t.Fatal(err)
	}
	return svc, p
}

// A send that reaches the queue after the committer stopped (a request
// still being served when shutdown ends) is refused at once, never left
// waiting forever.
func TestEnqueueNeverWaitsOnAStoppedCommitter(t *testing.T) {
	t.Parallel()
	svc, _ := setup(t, Options{})
	ctx := context.Background()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	stop()
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	err := svc.writer.enqueue(ctx, &queue.Message{Sender: "operator", SenderKind: queue.FromOperator, Target: "r", Body: "late",
		AckMode: ackmode.Injected, PolicyProfile: "p", ConfigVersion: "c"})
	if !errs.Is(err, errs.ShuttingDown) {
		t.Fatalf("enqueue after shutdown: %v", err)
	}
}

// syncBuffer is a log sink the test reads while the service writes to it.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// An ack deadline that cannot be expired because the database refuses the
// write is logged and tried again until it can, never silently dropped.
func TestAckExpiryFailureIsLoggedAndRetried(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	cfgDir := filepath.Join(root, ".config", "tamq")
	if err := os.MkdirAll(cfgDir, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(cfgDir, "config.toml"), []byte("[sqlite]\nbusy_timeout_ms = 20\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	var logs syncBuffer
	svc, p := setupIn(t, root, Options{Log: slog.New(slog.NewTextHandler(&logs, nil))})
	ctx := context.Background()
	past := time.Now().Add(-time.Minute)
	awaitingAck(t, svc, 1, past, past)
	// Another connection holds the write lock: every write of the service fails.
	holder, err := sql.Open("sqlite", "file:"+p.Database+"?_txlock=immediate")
	if err != nil {
		t.Fatal(err)
	}
	defer holder.Close()
	lock, err := holder.Begin()
	if err != nil {
		t.Fatal(err)
	}
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- svc.Run(runCtx) }()
	defer func() { stop(); <-done }()
	testutil.WaitFor(t, "the failure to be logged", func() bool {
		return strings.Contains(logs.String(), "cannot expire an ack deadline; will try again")
	})
	lock.Rollback()
	testutil.WaitFor(t, "the deadline to be expired once the database takes writes", func() bool {
		var state string
		svc.db.Reader.QueryRow(`SELECT state FROM messages WHERE id = 'm'`).Scan(&state)
		return state == "queued"
	})
}

// Issue 40: the service sweeps the hook sockets of brokers gone as it
// starts (a killed tmux server took them all; no broker may start soon).
func TestStartSweepsHookSocketsOfBrokersGone(t *testing.T) {
	t.Parallel()
	root := t.TempDir()
	env := map[string]string{"HOME": root, "XDG_STATE_HOME": filepath.Join(root, "state"), "XDG_RUNTIME_DIR": filepath.Join(root, "run")}
	p, err := paths.Resolve(paths.Tamq, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	gone := exec.Command("true")
	if err := gone.Run(); err != nil {
		t.Fatal(err)
	}
	stale := broker.HookSocketFor(p.StateDir, gone.Process.Pid)
	if err := os.MkdirAll(filepath.Dir(stale), 0o700); err != nil {
		t.Fatal(err)
	}
	ln, err := net.ListenUnix("unix", &net.UnixAddr{Name: stale, Net: "unix"})
	if err != nil {
		t.Fatal(err)
	}
	ln.SetUnlinkOnClose(false) // as a killed broker leaves it
	ln.Close()
	svc, _ := startAt(t, p, Options{})
	ctx, stop := context.WithCancel(context.Background())
	stop()
	if err := svc.Run(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Lstat(stale); !os.IsNotExist(err) {
		t.Errorf("the hook socket of a broker gone is still there: %v", err)
	}
}
