package testutil

import (
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Feed counts the bytes a fed recorder (FedRecorder) has received, as they
// arrive: a benchmark timing the first byte of a delivery waits on their
// arrival instead of polling the recording's size.
type Feed struct {
	mu   sync.Mutex
	n    int64
	grew chan struct{} // closed, and replaced, whenever n grows
}

// FedRecorder is RecorderCommand for repo alone whose bytes also reach the
// returned Feed, through a FIFO, as they arrive: tee writes them to the FIFO
// first, then to the recording.
func (e *Env) FedRecorder(t testing.TB, repo string) (command string, feed *Feed) {
	t.Helper()
	fifo := filepath.Join(e.Root, "feed-"+repo)
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	// Open for reading and writing: the open does not wait for the recorder
	// to start, and reads wait for its bytes instead of ending while it has
	// not opened the FIFO yet.
	r, err := os.OpenFile(fifo, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() }) // ends the reads below
	feed = &Feed{grew: make(chan struct{})}
	go func() {
		buf := make([]byte, 32<<10)
		for {
			k, err := r.Read(buf)
			if k > 0 {
				feed.mu.Lock()
				feed.n += int64(k)
				close(feed.grew)
				feed.grew = make(chan struct{})
				feed.mu.Unlock()
			}
			if err != nil {
				return
			}
		}
	}()
	rec := filepath.Join(e.Root, "rec", repo)
	return "sh -c 'stty raw -echo; exec tee \"" + rec + "\" > \"" + fifo + "\"'", feed
}

// Count is how many bytes have arrived so far.
func (f *Feed) Count() int64 {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.n
}

// WaitPast waits until more than n bytes have arrived and returns how many
// have; its deadline is a safety net for a broken benchmark.
func (f *Feed) WaitPast(t testing.TB, n int64) int64 {
	t.Helper()
	deadline := time.NewTimer(30 * time.Second)
	defer deadline.Stop()
	for {
		f.mu.Lock()
		got, grew := f.n, f.grew
		f.mu.Unlock()
		if got > n {
			return got
		}
		select {
		case <-grew:
		case <-deadline.C:
			t.Fatalf("nothing past byte %d reached the agent's terminal in 30 s", n)
		}
	}
}
