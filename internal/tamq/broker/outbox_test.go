package broker

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// service stands where tamq's service would: it takes lines, or is down, or
// hangs until released.
type service struct {
	mu      sync.Mutex
	down    bool
	hang    chan struct{}
	got     []api.SendArgs
	notices []string
}

func (s *service) send(ctx context.Context, m api.SendArgs) error {
	s.mu.Lock()
	down, hang := s.down, s.hang
	s.mu.Unlock()
	if hang != nil {
		<-hang
	}
	if down {
		return fmt.Errorf("dial: %w", ErrServiceDown)
	}
	if strings.HasPrefix(m.Text, "To:nowhere:") {
		return errs.New(errs.UnknownTarget, "unknown target")
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	s.got = append(s.got, m)
	return nil
}

func (s *service) notice(n string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.notices = append(s.notices, n)
}

func (s *service) snapshot() ([]api.SendArgs, []string) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.got), slices.Clone(s.notices)
}

func newOutbox(t *testing.T, svc *service) *Outbox {
	t.Helper()
	o := &Outbox{Send: svc.send, Notice: svc.notice, Spool: SpoolFor(t.TempDir(), 4242), Retry: 20 * time.Millisecond}
	o.Start()
	return o
}

func put(o *Outbox, target, body string) {
	o.Put(target, api.SendArgs{Text: "To:" + target + ": " + body})
}

func TestOutboxSendsInOrderAndFlushesAtClose(t *testing.T) {
	svc := &service{}
	o := newOutbox(t, svc)
	for i := range 40 {
		put(o, "railiance", fmt.Sprintf("msg-%02d", i))
	}
	put(o, "nowhere", "lost")
	if kept := o.Close(10*time.Second, nil); kept != 0 {
		t.Fatalf("Close kept %d", kept)
	}
	got, notices := svc.snapshot()
	if len(got) != 40 {
		t.Fatalf("%d of 40 sent", len(got))
	}
	for i, m := range got {
		if want := fmt.Sprintf("To:railiance: msg-%02d", i); m.Text != want || m.ObservedAt != nil {
			t.Errorf("line %d: %+v, want %q without a time", i, m, want)
		}
	}
	if !slices.Equal(notices, []string{"tamq: not sent: unknown target 'nowhere' (not in the gita registry)"}) {
		t.Errorf("notices %q", notices)
	}
	// Late keys (typed after the agent exited) neither panic nor vanish silently.
	put(o, "railiance", "typed late")
	if _, n := svc.snapshot(); !strings.Contains(n[len(n)-1], "not sent to railiance: the agent has exited") {
		t.Errorf("late line: %q", n)
	}
}

func TestOutboxSpoolsWhileTheServiceIsDown(t *testing.T) {
	svc := &service{down: true}
	o := newOutbox(t, svc)
	put(o, "railiance", "first")
	testutil.WaitFor(t, "the spool notice", func() bool { _, n := svc.snapshot(); return len(n) > 0 })
	_, notices := svc.snapshot()
	if notices[0] != "tamq: service down; kept 1 line for railiance, will send when it is back" {
		t.Errorf("notice %q", notices[0])
	}
	put(o, "net", "second")
	put(o, "railiance", "third")
	testutil.WaitFor(t, "three lines in the spool", func() bool { return len(spooled(t, o.Spool)) == 3 })
	if st, err := os.Stat(o.Spool.Path); err != nil || st.Mode().Perm() != 0o600 {
		t.Fatalf("spool file: %v %v", st.Mode(), err)
	}
	if st, _ := os.Stat(filepath.Dir(o.Spool.Path)); st.Mode().Perm() != 0o700 {
		t.Fatalf("spool directory %v", st.Mode())
	}
	seen := spooled(t, o.Spool)
	svc.mu.Lock()
	svc.down = false
	svc.mu.Unlock()
	if kept := o.Close(10*time.Second, nil); kept != 0 {
		t.Fatalf("kept %d after the service came back", kept)
	}
	got, _ := svc.snapshot()
	if len(got) != 3 {
		t.Fatalf("sent %+v", got)
	}
	for i, body := range []string{"first", "second", "third"} {
		if !strings.HasSuffix(got[i].Text, ": "+body) || got[i].ObservedAt == nil || !got[i].ObservedAt.Equal(*seen[i].ObservedAt) {
			t.Errorf("line %d: %+v, want %q seen at %v", i, got[i], body, seen[i].ObservedAt)
		}
	}
	if _, err := os.Stat(o.Spool.Path); !os.IsNotExist(err) {
		t.Errorf("the spool outlived its lines: %v", err)
	}
}

func TestOutboxLeavesTheSpoolWhenTheServiceStaysDown(t *testing.T) {
	svc := &service{down: true}
	o := newOutbox(t, svc)
	put(o, "railiance", "one")
	put(o, "railiance", "two")
	if kept := o.Close(50*time.Millisecond, nil); kept != 2 {
		t.Fatalf("kept %d, want 2", kept)
	}
	if lines := spooled(t, o.Spool); len(lines) != 2 || !strings.HasSuffix(lines[1].Text, "two") {
		t.Fatalf("spool %+v", lines)
	}
}

// A service that does not answer must not stall whoever puts lines: the
// queue is bounded and drops with a notice.
func TestOutboxNeverBlocksOnAHangingService(t *testing.T) {
	svc := &service{hang: make(chan struct{})}
	o := newOutbox(t, svc)
	o.Max = 8
	for i := range 100 {
		put(o, "railiance", fmt.Sprint(i)) // returns at once, or this test hangs
	}
	_, notices := svc.snapshot()
	if len(notices) != 1 || !strings.Contains(notices[0], "8 lines already wait for the service") {
		t.Fatalf("notices %q", notices)
	}
	close(svc.hang)
	o.Close(10*time.Second, nil)
	got, notices := svc.snapshot()
	if len(got) < 8 || len(got) > 9 {
		t.Errorf("%d lines sent, want the 8 queued (and the one in flight)", len(got))
	}
	if !strings.Contains(notices[len(notices)-1], "lines were dropped while the service did not answer") {
		t.Errorf("no summary of the dropped lines: %q", notices)
	}
}

func TestOutboxRefusesBrokenUTF8(t *testing.T) {
	svc := &service{}
	o := newOutbox(t, svc)
	put(o, "railiance", "caf\xe9")
	o.Close(time.Second, nil)
	got, notices := svc.snapshot()
	if len(got) != 0 || !slices.Equal(notices, []string{"tamq: not sent to railiance: the line has bytes that are not valid UTF-8"}) {
		t.Errorf("sent %+v, notices %q", got, notices)
	}
}

func spooled(t *testing.T, s *Spool) []api.SendArgs {
	t.Helper()
	f, err := os.Open(s.Path)
	if err != nil {
		return nil
	}
	defer f.Close()
	var out []api.SendArgs
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		var m api.SendArgs
		if err := json.Unmarshal(sc.Bytes(), &m); err != nil {
			t.Fatalf("spool line %q: %v", sc.Text(), err)
		}
		out = append(out, m)
	}
	return out
}
