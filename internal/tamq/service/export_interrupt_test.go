package service_test

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	"github.com/tmux-amq/tamq/internal/testutil"
	"golang.org/x/sys/unix"
)

// largeHistory writes n messages of 8 KiB bodies: an export of them takes
// long enough (about 80 MB of JSONL) to be interrupted well before its end.
func largeHistory(t *testing.T, path string, n int) {
	t.Helper()
	ctx := context.Background()
	db, err := sqlitedb.Open(ctx, sqlitedb.Options{Path: path, Migrations: store.Migrations, Synchronous: "NORMAL"})
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.WriteTx(ctx, func(tx *sql.Tx) error {
		_, err := tx.Exec(`WITH RECURSIVE c(n) AS (SELECT 0 UNION ALL SELECT n + 1 FROM c WHERE n + 1 < ?)
			INSERT INTO messages (id, batch_id, sender, sender_kind, target_repo, body, ack_mode, state,
				max_attempts, policy_profile, config_version, created_at, updated_at)
			SELECT printf('00000000-0000-7000-8000-%012x', n), printf('00000000-0000-7000-8000-%012x', n),
				'railiance', 'worker', 'net-kingdom', printf('%d %.*c', n, 8000, 'x'), 'injected', 'injected',
				3, 'default@1', 'c', 1000 + n, 1000 + n
			FROM c`, n)
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestInterruptedExportLeavesTheFileAsItWas starts a large export into a
// file, signals it once some of it is written, and checks that the file is
// byte for byte what it was (or, when the export created it, gone) and the
// exit status is the shell's for that signal. A SIGINT used to kill the
// process mid-write, leaving part of the export and a cut line.
func TestInterruptedExportLeavesTheFileAsItWas(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	largeHistory(t, e.Database(), 2_500) // 20 MB of bodies: far more than is written before the signal (stopped at once)
	dir := t.TempDir()
	for _, c := range []struct {
		name    string
		before  *string // nil: no file before the export
		sig     syscall.Signal
		status  int
		message string
	}{
		// The last line lacks its newline: the export adds one first.
		{"SIGINT appending", ptr("{\"v\":1,\"id\":\"earlier\"}\n{\"v\":1,\"id\":\"cut"), syscall.SIGINT, 130, "export interrupted by SIGINT"},
		{"SIGTERM creating", nil, syscall.SIGTERM, 143, "export interrupted by SIGTERM"},
	} {
		file := filepath.Join(dir, strings.ReplaceAll(c.name, " ", "-")+".jsonl")
		size := int64(0)
		if c.before != nil {
			if err := os.WriteFile(file, []byte(*c.before), 0o600); err != nil {
				t.Fatal(err)
			}
			size = int64(len(*c.before))
		}
		cmd := e.Command(context.Background(), "tamq", "export", file)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		growsPast(t, dir, file, size+1)
		// Stopped at once, so the rest of the export cannot run ahead of
		// the signal however slowly this test is scheduled; the signal
		// arrives as the process continues.
		for _, s := range []syscall.Signal{syscall.SIGSTOP, c.sig, syscall.SIGCONT} {
			if err := cmd.Process.Signal(s); err != nil {
				t.Fatal(err)
			}
		}
		err := cmd.Wait()
		var exit *exec.ExitError
		if !errors.As(err, &exit) || exit.ExitCode() != c.status || !strings.Contains(stderr.String(), c.message+"; "+file+" left as it was") {
			t.Errorf("%s: %v\n%s", c.name, err, stderr.String())
		}
		got, err := os.ReadFile(file)
		switch {
		case c.before == nil && !errors.Is(err, fs.ErrNotExist):
			t.Errorf("%s: the file the export created is still there (%d bytes, %v)", c.name, len(got), err)
		case c.before != nil && string(got) != *c.before:
			t.Errorf("%s: the file has %d bytes, want the %d it had", c.name, len(got), len(*c.before))
		}
	}
}

// growsPast returns once file in dir has more than size bytes. It wakes on
// inotify's events, not on a polling interval: the export is signalled
// the moment it is seen writing, before it can run far ahead (a poll that
// slept 50 ms let a whole export finish on a busy machine).
func growsPast(t *testing.T, dir, file string, size int64) {
	t.Helper()
	fd, err := unix.InotifyInit1(unix.IN_CLOEXEC | unix.IN_NONBLOCK)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Close(fd)
	if _, err := unix.InotifyAddWatch(fd, dir, unix.IN_CREATE|unix.IN_MODIFY); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(30 * time.Second)
	buf := make([]byte, 64<<10)
	for {
		if fi, err := os.Stat(file); err == nil && fi.Size() > size {
			return
		}
		left := time.Until(deadline)
		if left <= 0 {
			t.Fatalf("%s did not grow past %d bytes in 30s", file, size)
		}
		fds := []unix.PollFd{{Fd: int32(fd), Events: unix.POLLIN}}
		if _, err := unix.Poll(fds, int(left.Milliseconds())+1); err != nil && !errors.Is(err, unix.EINTR) {
			t.Fatal(err)
		}
		for { // drain: only the file's size matters
			if _, err := unix.Read(fd, buf); err != nil {
				break
			}
		}
	}
}

func ptr[T any](v T) *T { return &v }
