package service_test

import (
	"context"
	"database/sql"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/benchutil"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// historySize is the generated history the targets are stated for.
const historySize = 1_000_000

// generatedSpan is how far back the generated history reaches: past the
// 365-day purge default.
const generatedSpan = 400 * 24 * time.Hour

var (
	generated     sync.Once
	generatedPath string
	generatedErr  error
)

// generatedHistory builds once per test process a tamq database holding a
// million messages from 20 repos spread over 400 days (one in a hundred still
// queued, bodies of 40 to 340 bytes), each with the three receipts the
// service writes on the way to injected, and returns its path. The rows go in
// through SQL in one transaction: the benchmarks measure reading, exporting,
// replaying and purging, not this.
func generatedHistory(b *testing.B) string {
	generated.Do(func() {
		dir, err := os.MkdirTemp("", "tamq-history-bench-")
		if err != nil {
			generatedErr = err
			return
		}
		generatedPath = filepath.Join(dir, "tamq.sqlite3")
		generatedErr = generate(generatedPath, historySize, time.Now().Add(-generatedSpan))
	})
	if generatedErr != nil {
		b.Fatal(generatedErr)
	}
	return generatedPath
}

// removeGeneratedHistory deletes the generated database, if one was made.
func removeGeneratedHistory() {
	if generatedPath != "" {
		os.RemoveAll(filepath.Dir(generatedPath))
	}
}

// generate writes the history as schema version 4 held it (every receipt
// spelled out in full), migrates it to the current schema, as an upgrade
// does, and compacts the result into path, as a history written by the
// current schema lays out. The version 4 file's figures go to
// generatedBefore and the migration's time to generatedMigration.
func generate(path string, n int, start time.Time) error {
	ctx := context.Background()
	dir := filepath.Join(filepath.Dir(path), "v4")
	v4 := filepath.Join(dir, "tamq.sqlite3")
	if err := os.Mkdir(dir, 0o700); err != nil {
		return err
	}
	defer os.RemoveAll(dir)
	if err := generateV4(v4, n, start); err != nil {
		return err
	}
	var err error
	if generatedBefore, err = measureFile(v4, "receipts"); err != nil {
		return err
	}
	// To version 5, then on to the latest, each timed with its backup.
	t0 := time.Now()
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: v4, BackupDir: filepath.Join(dir, "backups"),
		Migrations: store.Migrations[:5], Synchronous: "NORMAL"})
	if err != nil {
		return err
	}
	db.Close()
	t1 := time.Now()
	db, err = sqlitedb.Open(ctx, sqlitedb.Options{Path: v4, BackupDir: filepath.Join(dir, "backups"),
		Migrations: store.Migrations, Synchronous: "NORMAL"})
	if err != nil {
		return err
	}
	generatedMigration, generatedLastMigration = time.Since(t0), time.Since(t1)
	defer db.Close()
	_, err = db.Writer.ExecContext(ctx, "VACUUM INTO ?", path)
	return err
}

// fileFigures are a database file's size and its receipts' part of it.
type fileFigures struct{ bytes, receiptBytes int64 }

var (
	generatedBefore    fileFigures
	generatedMigration time.Duration
	// generatedLastMigration is the time of the migrations after version 5.
	generatedLastMigration time.Duration
)

// measureFile reads the size of the database at path and, through dbstat,
// the pages of the named tables and their indexes.
func measureFile(path string, tables ...string) (fileFigures, error) {
	f := fileFigures{bytes: fileSize(path)}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return f, err
	}
	defer db.Close()
	for _, t := range tables {
		var n int64
		if err := db.QueryRow(`SELECT COALESCE(sum(pgsize), 0) FROM dbstat WHERE name = ?1
			OR name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1)`, t).Scan(&n); err != nil {
			return f, err
		}
		f.receiptBytes += n
	}
	return f, nil
}

// tableAndIndexes reads, through dbstat, the pages of the named tables and
// those of their indexes.
func tableAndIndexes(path string, tables ...string) (rows, indexes int64, err error) {
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		return 0, 0, err
	}
	defer db.Close()
	for _, t := range tables {
		var r, i int64
		if err := db.QueryRow(`SELECT COALESCE(sum(pgsize) FILTER (WHERE name = ?1), 0), COALESCE(sum(pgsize) FILTER (WHERE name <> ?1), 0)
			FROM dbstat WHERE name = ?1 OR name IN (SELECT name FROM sqlite_schema WHERE type = 'index' AND tbl_name = ?1)`, t).Scan(&r, &i); err != nil {
			return 0, 0, err
		}
		rows, indexes = rows+r, indexes+i
	}
	return rows, indexes, nil
}

// generateV4 writes the history into a database of schema version 4.
func generateV4(path string, n int, start time.Time) error {
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: store.Migrations[:4], Synchronous: "NORMAL"})
	if err != nil {
		return err
	}
	defer db.Close()
	step := generatedSpan.Milliseconds() / int64(n)
	filler := strings.Repeat("The build is green; please rebase onto main and run the checks again. ", 5)
	return db.WriteTx(ctx, func(tx *sql.Tx) error {
		if _, err := tx.Exec(`INSERT INTO endpoints (id, tmux_socket, tmux_server_pid, session_name, state, created_at, updated_at)
			VALUES ('tmux-amq-1', '/nonexistent', 1, 'tamq', 'disconnected', 0, 0)`); err != nil {
			return err
		}
		if _, err := tx.Exec(`WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n + 1 < ?)
			INSERT INTO messages (id, batch_id, endpoint_id, sender, sender_kind, target_repo, body, ack_mode, state,
				attempts, max_attempts, policy_profile, config_version, created_at, updated_at, next_attempt_at, injected_at, acked_at)
			SELECT id, id, 'tmux-amq-1', 'repo-' || (n * 7 % 20), 'worker', 'repo-' || ((n * 13 + 1) % 20),
				substr(?, 1, 40 + (n * 7919) % 300), CASE WHEN n % 3 = 0 THEN 'acknowledged' ELSE 'injected' END,
				CASE WHEN n % 100 = 0 THEN 'queued' WHEN n % 3 = 0 THEN 'acknowledged' ELSE 'injected' END,
				CASE WHEN n % 100 = 0 THEN 0 ELSE 1 END, 3, 'default@0123456789ab', '0123456789ab', ts, ts + 5, ts,
				CASE WHEN n % 100 = 0 THEN NULL ELSE ts + 5 END, CASE WHEN n % 3 = 0 AND n % 100 <> 0 THEN ts + 900 END
			FROM (SELECT n, ts, printf('%08x-%04x-7%03x-8000-%012x', ts >> 16, ts & 65535, n & 4095, n) AS id
				FROM (SELECT n, ? + n * ? AS ts FROM c))`, n, filler, start.UnixMilli(), step); err != nil {
			return err
		}
		for i, status := range []string{"queued", "delivering", "injected"} {
			if _, err := tx.Exec(`INSERT INTO receipts (at, kind, subject_id, status, reason, attempt, endpoint_id,
				policy_profile, config_version, detail, projected_at)
				SELECT created_at + ?, 'message.transition', id, ?, 'accepted', ?, endpoint_id, policy_profile, config_version,
					'{"ack_mode":"' || ack_mode || '","sender_kind":"worker","target":"' || target_repo || '","to":"' || ? || '"}', created_at + 1000
				FROM messages WHERE state <> 'queued' OR ? = 'queued'`, i, status, i, status, status); err != nil {
				return err
			}
		}
		return nil
	})
}

// historyEnv is a tamq environment whose database is a copy of the generated
// history.
func historyEnv(b *testing.B) *testutil.Env {
	src := generatedHistory(b)
	e := testutil.NewEnv(b)
	if err := os.MkdirAll(e.TamqState(), 0o700); err != nil {
		b.Fatal(err)
	}
	if err := copyFile(src, e.Database()); err != nil {
		b.Fatal(err)
	}
	return e
}

func copyFile(from, to string) error {
	in, err := os.Open(from)
	if err != nil {
		return err
	}
	defer in.Close()
	out, err := os.OpenFile(to, os.O_WRONLY|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, in); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}

// BenchmarkHistoryPage reads pages of 50 filtered by repo and a time window
// (the last 1 to 30 days), a third of them continuing after an earlier page,
// from the generated million messages. Target: p99 at most 10 ms. The
// baseline reads the same 50 rows by primary key: the ratio is what filtering
// and paging add to fetching the rows at all.
func BenchmarkHistoryPage(b *testing.B) {
	path := generatedHistory(b)
	ctx := context.Background()
	db, err := sqlitedb.OpenReadOnly(ctx, path, sqlitedb.LatestVersion(store.Migrations), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	rng := rand.New(rand.NewPCG(7, 8))
	now := time.Now()
	var ours, base []time.Duration
	var after string
	b.ResetTimer()
	for i := 0; i < max(b.N, 300); i++ {
		p := store.Page{Limit: 50, Filter: store.Filter{
			Repo:  fmt.Sprintf("repo-%d", rng.IntN(20)),
			Since: now.Add(-time.Duration(1+rng.IntN(30)) * 24 * time.Hour),
		}}
		if i%3 == 2 {
			p.After = after
		}
		t0 := time.Now()
		page, err := store.History(ctx, db, p)
		ours = append(ours, time.Since(t0))
		if err != nil || len(page) != 50 {
			b.Fatalf("page of %d: %v", len(page), err)
		}
		after = page[len(page)-1].ID
		ids := make([]any, len(page))
		for j, m := range page {
			u := uuid.MustParse(m.ID)
			ids[j] = u[:] // as message_rows stores it
		}
		t0 = time.Now()
		rows, err := db.QueryContext(ctx, `SELECT id, batch_id, endpoint_id, sender, sender_kind, target_repo, body, ack_mode, state,
			attempts, max_attempts, policy_profile, config_version, created_at, updated_at, next_attempt_at, injected_at
			FROM message_rows WHERE id IN (?`+strings.Repeat(",?", len(ids)-1)+`)`, ids...)
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for rows.Next() {
			n++
		}
		rows.Close()
		base = append(base, time.Since(t0))
	}
	b.StopTimer()
	p99 := benchutil.Percentile(ours, 99)
	b.ReportMetric(float64(benchutil.Percentile(ours, 50).Microseconds())/1000, "p50-ms")
	b.ReportMetric(float64(p99.Microseconds())/1000, "p99-ms")
	b.ReportMetric(float64(p99)/float64(benchutil.Percentile(base, 99)), "p99-ratio-to-pk-fetch")
}

// BenchmarkExport exports the whole generated history with `tamq export`
// into /dev/null. Target: 200,000 lines a second. The baseline is a plain
// scan of the same columns through database/sql in this process: the ratio is
// what building the lines costs on top of reading the rows.
func BenchmarkExport(b *testing.B) {
	e := historyEnv(b)
	b.ResetTimer()
	t0 := time.Now()
	cmd := e.Command(context.Background(), "tamq", "export", "-")
	var stderr strings.Builder
	cmd.Stdout, cmd.Stderr = io.Discard, &stderr
	if err := cmd.Run(); err != nil {
		b.Fatalf("%v %s", err, stderr.String())
	}
	ours := time.Since(t0)
	b.StopTimer()
	db, err := sqlitedb.OpenReadOnly(context.Background(), e.Database(), sqlitedb.LatestVersion(store.Migrations), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 = time.Now()
	rows, err := db.Query(`SELECT * FROM message_rows ORDER BY rowid`)
	if err != nil {
		b.Fatal(err)
	}
	cols, _ := rows.Columns()
	vals := make([]any, len(cols))
	for i := range vals {
		vals[i] = new(any)
	}
	for rows.Next() {
		rows.Scan(vals...)
	}
	rows.Close()
	scan := time.Since(t0)
	rate := historySize / ours.Seconds()
	b.ReportMetric(rate, "lines/s")
	b.ReportMetric(rate/(historySize/scan.Seconds()), "ratio-to-row-scan")
}

// BenchmarkPurgeOldest100MB purges the oldest 100 MB of the generated history
// with `tamq purge --max-size <history-100MB> --yes`, space reclaim included.
// Target: under 10 s. The baseline deletes the same rows with one DELETE on a
// second copy (no chunks, no vacuum): the ratio is what purging in short
// transactions and giving the space back cost on top. It also reports the
// file size per million messages, before and after.
func BenchmarkPurgeOldest100MB(b *testing.B) {
	e := historyEnv(b)
	ctx := context.Background()
	db, err := sqlitedb.OpenReadOnly(ctx, e.Database(), sqlitedb.LatestVersion(store.Migrations), 0)
	if err != nil {
		b.Fatal(err)
	}
	plan, err := store.PlanPurge(ctx, db, store.PurgeRule{MaxBytes: 1}) // only for the history size
	db.Close()
	if err != nil {
		b.Fatal(err)
	}
	const purgeBytes = 100 * 1000 * 1000
	keep := plan.HistoryBytes - purgeBytes
	sizeBefore := fileSize(e.Database())
	b.ResetTimer()
	t0 := time.Now()
	r := e.Run(b, "tamq", "purge", "--max-size", strconv.FormatInt(keep, 10)+"B", "--yes", "--json")
	ours := time.Since(t0)
	b.StopTimer()
	if r.Status != 0 {
		b.Fatalf("purge: %s", r)
	}
	var deleted int
	fmt.Sscanf(r.Stdout[strings.Index(r.Stdout, `"deleted":`)+len(`"deleted":`):], "%d", &deleted)

	// Baseline: the same oldest rows in one statement on a fresh copy.
	base := historyEnv(b)
	raw, err := sql.Open("sqlite", "file:"+base.Database())
	if err != nil {
		b.Fatal(err)
	}
	defer raw.Close()
	t0 = time.Now()
	// 0, 1 and 5 are the codes of injected, acknowledged and failed.
	if _, err := raw.Exec(`DELETE FROM message_rows WHERE rowid IN (SELECT rowid FROM message_rows
		WHERE state IN (0, 1, 5) ORDER BY created_at, id LIMIT ?)`, deleted); err != nil {
		b.Fatal(err)
	}
	baseline := time.Since(t0)
	b.ReportMetric(ours.Seconds(), "purge-s")
	b.ReportMetric(float64(deleted), "messages-purged")
	b.ReportMetric(ours.Seconds()/baseline.Seconds(), "ratio-to-one-delete")
	b.ReportMetric(float64(sizeBefore)/1e6*(1e6/historySize), "MB-per-million-messages")
	b.ReportMetric(float64(sizeBefore-fileSize(e.Database()))/1e6, "MB-given-back")
}

// BenchmarkStorageSize reports the file size of the generated million
// messages, per million, and the receipts' part of it: as schema version 4
// stored them, and after migrating to the current schema (compacted, as a
// history written by it lays out), from the same run, with the messages'
// rows and their indexes. Target: at most 600 MB per million. It also
// reports how long the migration of that history took, backups included
// (all of it, and from version 5 on), and the history's size as the
// advisory and purge count it, with the time that reading takes.
func BenchmarkStorageSize(b *testing.B) {
	path := generatedHistory(b)
	after, err := measureFile(path, "receipt_rows", "receipt_codes")
	if err != nil {
		b.Fatal(err)
	}
	perMillion := func(n int64) float64 { return float64(n) / 1e6 * (1e6 / historySize) }
	b.ReportMetric(perMillion(generatedBefore.bytes), "MB-per-million-v4")
	b.ReportMetric(perMillion(generatedBefore.receiptBytes), "receipts-MB-v4")
	b.ReportMetric(perMillion(after.bytes), "MB-per-million")
	b.ReportMetric(perMillion(after.receiptBytes), "receipts-MB")
	b.ReportMetric(float64(after.receiptBytes)/float64(after.bytes)*100, "receipts-%")
	rows, indexes, err := tableAndIndexes(path, "message_rows", "message_texts")
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(perMillion(rows), "messages-MB")
	b.ReportMetric(perMillion(indexes), "message-indexes-MB")
	b.ReportMetric(generatedMigration.Seconds(), "migrate-s")
	b.ReportMetric(generatedLastMigration.Seconds(), "migrate-from-v5-s")
	// The history's size as the advisory and purge --max-size read it.
	db, err := sqlitedb.OpenReadOnly(context.Background(), path, sqlitedb.LatestVersion(store.Migrations), 0)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	t0 := time.Now()
	size, _, _, err := store.HistorySize(context.Background(), db)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(time.Since(t0).Seconds(), "size-reading-s")
	b.ReportMetric(perMillion(size), "history-size-MB")
}

func fileSize(path string) int64 {
	var n int64
	for _, p := range []string{path, path + "-wal"} {
		if fi, err := os.Stat(p); err == nil {
			n += fi.Size()
		}
	}
	return n
}
