package daemon

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// testPaths are a program's paths in a fresh directory.
func testPaths(t *testing.T) paths.Paths {
	t.Helper()
	dir := t.TempDir()
	p, err := paths.Resolve(paths.Engine, func(k string) string {
		return map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": filepath.Join(dir, "run"), "XDG_STATE_HOME": filepath.Join(dir, "state")}[k]
	})
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// events records what happened, in order, from any goroutine.
type events struct {
	mu   sync.Mutex
	list []string
	seen chan string // every event, as it happens
}

func (e *events) add(s string) {
	e.mu.Lock()
	e.list = append(e.list, s)
	e.mu.Unlock()
	e.seen <- s
}

// await waits for the event want.
func (e *events) await(want string) {
	for s := range e.seen {
		if s == want {
			return
		}
	}
}
func (e *events) get() []string {
	e.mu.Lock()
	defer e.mu.Unlock()
	return slices.Clone(e.list)
}

// worker records its start and its stop.
func worker(name string, ev *events, started chan<- string) *Worker {
	return &Worker{Name: name, Run: func(ctx context.Context) {
		started <- name
		<-ctx.Done()
		ev.add("stopped " + name)
	}}
}

// The skeleton runs a program's server and workers and stops them in the
// order a program relies on: drain-first workers while connections are open,
// then the requests under way are answered, then the other workers in
// reverse, then the program's final writes; then the lock and the socket go.
func TestServiceRunsAndStopsInOrder(t *testing.T) {
	p := testPaths(t)
	s, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := Open(p, nil); !errs.Is(err, errs.AlreadyRunning) {
		t.Fatalf("a second Open: %v", err)
	}
	ev := &events{seen: make(chan string, 16)}
	inRequest, release := make(chan bool), make(chan bool)
	srv := &unixrpc.Server{Handlers: map[string]unixrpc.Handler{
		"slow": func(context.Context, unixrpc.Peer, *unixrpc.Request) (any, error) {
			inRequest <- true
			<-release
			ev.add("answered slow")
			return "done", nil
		},
	}}
	if err := s.Listen(srv); err != nil {
		t.Fatal(err)
	}
	started := make(chan string, 4)
	plan := Plan{
		Grace:      10 * time.Second,
		DrainFirst: []*Worker{worker("dispatcher", ev, started)},
		Workers:    []*Worker{worker("committer", ev, started), worker("watcher", ev, started)},
		Stopping:   func() { ev.add("stopping") },
		Stopped: func(ctx context.Context, reason string, exceeded bool) error {
			ev.add("stopped hook: " + reason)
			return nil
		},
	}
	ran := make(chan error, 1)
	go func() { ran <- s.Run(context.Background(), plan) }()
	for range 3 {
		<-started
	}
	c := &unixrpc.Client{Socket: p.Socket, Timeout: 10 * time.Second}
	var answer string
	answered := make(chan error, 1)
	go func() { answered <- c.Call(context.Background(), "slow", nil, &answer) }()
	<-inRequest
	s.Stop()
	// The request under way holds the drain: the dispatcher has stopped,
	// the other workers have not.
	ev.await("stopped dispatcher")
	close(release)
	if err := <-answered; err != nil || answer != "done" {
		t.Fatalf("the request under way: %q, %v", answer, err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	want := []string{"stopping", "stopped dispatcher", "answered slow", "stopped watcher", "stopped committer", "stopped hook: stop request"}
	if got := ev.get(); !slices.Equal(got, want) {
		t.Errorf("order\n got %q\nwant %q", got, want)
	}
	if _, err := os.Lstat(p.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	again, err := Open(p, nil)
	if err != nil {
		t.Fatalf("the lock was not released: %v", err)
	}
	again.Close()
}

// A start that fails after Open (the program's data would not open) releases
// everything with Close, its own OnClose steps included, and leaves no socket.
func TestCloseWithoutRun(t *testing.T) {
	p := testPaths(t)
	s, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	s.OnClose(func() { closed = true })
	if err := s.Listen(&unixrpc.Server{}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	s.Close() // twice is harmless
	if !closed {
		t.Error("OnClose did not run")
	}
	if _, err := os.Lstat(p.Socket); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("socket left behind: %v", err)
	}
	if again, err := Open(p, nil); err != nil {
		t.Errorf("the lock was not released: %v", err)
	} else {
		again.Close()
	}
}

// A signal ends Run with the signal named as the reason.
func TestSignalEndsRun(t *testing.T) {
	p := testPaths(t)
	s, err := Open(p, nil)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Listen(&unixrpc.Server{}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := SignalContext(context.Background())
	defer stop()
	reason := make(chan string, 1)
	ran := make(chan error, 1)
	go func() {
		ran <- s.Run(ctx, Plan{Grace: 5 * time.Second, Stopped: func(_ context.Context, r string, _ bool) error {
			reason <- r
			return nil
		}})
	}()
	if err := syscall.Kill(os.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := <-ran; err != nil {
		t.Fatal(err)
	}
	if r := <-reason; r != "SIGTERM" {
		t.Errorf("reason %q", r)
	}
}

// A worker that does not stop within the wait is reported, not waited for.
func TestWorkerStopIsBounded(t *testing.T) {
	release := make(chan struct{})
	w := &Worker{Name: "stubborn", Run: func(ctx context.Context) { <-release }}
	w.Start(context.Background())
	wait, cancel := context.WithTimeout(context.Background(), 10*time.Millisecond)
	defer cancel()
	if err := w.Stop(wait); !errs.Is(err, errs.Timeout) {
		t.Errorf("Stop = %v", err)
	}
	close(release)
	<-w.Done()
	if err := (&Worker{Name: "never started"}).Stop(context.Background()); err != nil {
		t.Errorf("Stop of a worker never started: %v", err)
	}
}
