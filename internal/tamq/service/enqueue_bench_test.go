package service

import (
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// discardWriter stands in for the terminal so the benchmark measures the
// enqueue path alone.
type discardWriter struct{}

func (discardWriter) Write(context.Context, queue.Endpoint, queue.Window, string, *Confirm) Written {
	return Written{Outcome: api.DeliveryOutcome{Kind: api.Written}, Path: "discard"}
}

// pacedWriter stands in for a terminal that takes as long as the default
// Enter pause to write a message into.
type pacedWriter struct{}

func (pacedWriter) Write(ctx context.Context, _ queue.Endpoint, _ queue.Window, _ string, _ *Confirm) Written {
	select {
	case <-time.After(200 * time.Millisecond):
	case <-ctx.Done():
	}
	return Written{Outcome: api.DeliveryOutcome{Kind: api.Written}, Path: "paced"}
}

// inProcessService runs a service in this process with its files under
// root, with a gita registry of one repo and an endpoint with its window
// registered, writing deliveries with o.Writer.
func inProcessService(b testing.TB, root string, o Options) (*Service, paths.Paths, string) {
	b.Helper()
	repo := filepath.Join(root, "src", "net-kingdom")
	if out, err := exec.Command("git", "init", "-q", repo).CombinedOutput(); err != nil {
		b.Fatalf("%v %s", err, out)
	}
	os.MkdirAll(filepath.Join(root, "state", "gita"), 0o755)
	os.WriteFile(filepath.Join(root, "state", "gita", "repos.csv"), []byte(repo+",net-kingdom,,\r\n"), 0o644)
	svc, p := setupIn(b, root, o)
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- svc.Run(ctx) }()
	b.Cleanup(func() { stop(); <-done })
	// A real tmux server, so the watcher keeps the endpoint connected; the
	// writer never touches it.
	tm := testutil.NewTmux(b)
	pid, err := strconv.Atoi(tm.Must(b, "display", "-p", "#{pid}"))
	if err != nil {
		b.Fatal(err)
	}
	if err := svc.store.Endpoints.Register(ctx, queue.Endpoint{ID: "tmux-amq-" + strconv.Itoa(pid), TmuxSocket: tm.Must(b, "display", "-p", "#{socket_path}"),
		ServerPID: pid, Session: "tamq",
		Windows: []queue.Window{{Repo: "net-kingdom", RepoPath: repo, WindowID: "@0", PaneID: "%0", Mode: queue.Manual}}}); err != nil {
		b.Fatal(err)
	}
	svc.endpoints.changed()
	return svc, p, "tmux-amq-" + strconv.Itoa(pid)
}

// BenchmarkEnqueueInProcess profiles the send path (validation, endpoint
// lookup, grouped durable commit) with 8 concurrent clients on a real socket
// and database; the end-to-end version is BenchmarkEnqueueThroughput.
func BenchmarkEnqueueInProcess(b *testing.B) {
	_, p, _ := inProcessService(b, b.TempDir(), Options{Writer: discardWriter{}})
	ctx := context.Background()
	client := &unixrpc.Client{Socket: p.Socket}
	b.ResetTimer()
	var wg sync.WaitGroup
	for c := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := c; i < b.N; i += 8 {
				if err := client.Call(ctx, api.OpSend, api.SendArgs{Text: fmt.Sprintf("To:net-kingdom: load %d", i)}, nil); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
}
