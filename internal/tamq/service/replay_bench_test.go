package service

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/jsonl"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// BenchmarkReplay replays a JSONL file of 20,000 exported messages with
// `tamq replay` into a service running in this process, whose dispatcher
// delivers the replayed messages meanwhile, each taking the default Enter
// pause, as into a real terminal. Target: 20,000 lines a second. The baseline
// inserts the same rows into a scratch SQLite file, 200 to a transaction
// (the size of one replay request): the ratio is what validation, the
// protocol and the receipts cost on top of storing the rows.
func BenchmarkReplay(b *testing.B) {
	const lines = 20_000
	_, p, endpoint := inProcessService(b, b.TempDir(), Options{Writer: pacedWriter{}})
	dir := b.TempDir()
	file := filepath.Join(dir, "export.jsonl")
	f, err := os.Create(file)
	if err != nil {
		b.Fatal(err)
	}
	w := bufio.NewWriter(f)
	created := time.Now().Add(-time.Hour)
	for i := range lines {
		body := fmt.Sprintf("replayed message %d: the build is green, please rebase onto main", i)
		line, _ := jsonl.Encode(api.Message{
			ID: fmt.Sprintf("01900000-0000-7000-8000-%012d", i), BatchID: "b", Sender: "net-kingdom", SenderKind: "worker",
			Target: "net-kingdom", Body: &body, AckMode: "injected", State: "injected", Attempts: 1, MaxRetries: 3, MaxAttemptsV1: 3,
			PolicyProfile: "default@x", ConfigVersion: "c", CreatedAt: created, UpdatedAt: created})
		w.Write(append(line, '\n'))
	}
	if err := w.Flush(); err != nil {
		b.Fatal(err)
	}
	f.Close()
	bin := testutil.Binaries(b)
	cmd := exec.Command(filepath.Join(bin, "tamq"), "replay", "--quiet", file, "--endpoint", endpoint)
	cmd.Env = append(os.Environ(), "TAMQ_SOCKET="+p.Socket, "TAMQ_STATE_DIR="+p.StateDir, "TAMQ_CONFIG="+p.ConfigFile)
	b.ResetTimer()
	t0 := time.Now()
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("replay: %v\n%s", err, out)
	}
	ours := time.Since(t0)
	b.StopTimer()

	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "scratch.sqlite3")+"?_pragma=journal_mode(WAL)&_pragma=synchronous(FULL)&_txlock=immediate")
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE TABLE t (id TEXT PRIMARY KEY, body TEXT)`); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	t0 = time.Now()
	for i := 0; i < lines; i += 200 {
		tx, err := db.BeginTx(ctx, nil)
		if err != nil {
			b.Fatal(err)
		}
		for j := i; j < i+200; j++ {
			tx.Exec(`INSERT INTO t VALUES (?, ?)`, fmt.Sprintf("id-%d", j), fmt.Sprintf("replayed message %d: the build is green, please rebase onto main", j))
		}
		if err := tx.Commit(); err != nil {
			b.Fatal(err)
		}
	}
	base := time.Since(t0)
	rate := lines / ours.Seconds()
	b.ReportMetric(rate, "lines/s")
	b.ReportMetric(rate/(lines/base.Seconds()), "ratio-to-plain-inserts")
}
