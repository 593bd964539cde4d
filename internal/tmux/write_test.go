package tmux

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// recorder opens a window whose program appends every byte it reads from its
// raw terminal to a file, and waits until it is ready. bracketed turns on
// bracketed paste first.
func recorder(t testing.TB, ctx context.Context, s Server, bracketed bool) (g Guard, file string) {
	t.Helper()
	file = filepath.Join(t.TempDir(), "rec")
	mode := ""
	if bracketed {
		mode = `\033[?2004h`
	}
	// READY is printed after the mode change, so once tmux shows it, tmux
	// has seen the mode too.
	script := `stty raw -echo && printf '` + mode + `READY' && exec cat > "$0"`
	repo := filepath.Base(filepath.Dir(file))
	w, err := s.NewWindow(ctx, "work", "rec", repo, "", []string{"sh", "-c", script, file}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the recorder", func() bool {
		text, _ := s.CapturePane(ctx, w.PaneID)
		return strings.Contains(text, "READY")
	})
	pid, err := s.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	return Guard{PaneID: w.PaneID, ServerPID: pid, Repo: repo}, file
}

func TestPasteExact(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	pane, file := recorder(t, ctx, s, false)
	body := "line1\nline2 ünïcödé\ttab"
	if err := s.Paste(ctx, pane, body); err != nil {
		t.Fatal(err)
	}
	if err := s.SendEnter(ctx, pane); err != nil {
		t.Fatal(err)
	}
	waitFile(t, file, body+"\r")

	bpane, bfile := recorder(t, ctx, s, true)
	if err := s.Paste(ctx, bpane, body); err != nil {
		t.Fatal(err)
	}
	if err := s.SendEnter(ctx, bpane); err != nil {
		t.Fatal(err)
	}
	waitFile(t, bfile, "\x1b[200~"+body+"\x1b[201~\r")

	if out, err := s.Run(ctx, nil, "list-buffers"); err != nil || out != "" {
		t.Fatalf("buffers left behind: %q, %v", out, err)
	}
}

func TestPasteLarge(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	pane, file := recorder(t, ctx, s, false)
	var b strings.Builder
	for i := 0; b.Len() < 8192; i++ {
		fmt.Fprintf(&b, "line %04d: the quick brown fox jumps over the lazy dog\n", i)
	}
	body := b.String()[:8192]
	if err := s.Paste(ctx, pane, body); err != nil {
		t.Fatal(err)
	}
	waitFile(t, file, body)
}

func TestPasteConcurrent(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	const n = 20
	var panes [2]Guard
	var files, wants [2]string
	for i := range panes {
		panes[i], files[i] = recorder(t, ctx, s, false)
	}
	var wg sync.WaitGroup
	errc := make(chan error, 2*n)
	for i := range panes {
		var want strings.Builder
		for j := range n {
			fmt.Fprintf(&want, "pane %d message %d\n", i, j)
		}
		wants[i] = want.String()
		wg.Go(func() {
			for j := range n {
				errc <- s.Paste(ctx, panes[i], fmt.Sprintf("pane %d message %d\n", i, j))
			}
		})
	}
	wg.Wait()
	close(errc)
	for err := range errc {
		if err != nil {
			t.Fatal(err)
		}
	}
	for i := range panes {
		waitFile(t, files[i], wants[i])
	}
}

func TestPasteErrors(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	pid, err := s.PID(ctx)
	if err != nil {
		t.Fatal(err)
	}
	missing := Guard{PaneID: "%99999", ServerPID: pid, Repo: "r"}
	err = s.Paste(ctx, missing, "hello")
	if !errs.Is(err, errs.NotFound) || !errors.Is(err, ErrNotWritten) || !strings.Contains(err.Error(), "%99999") {
		t.Fatalf("Paste to a missing pane: %v", err)
	}
	if err := s.SendEnter(ctx, missing); !errs.Is(err, errs.NotFound) {
		t.Fatalf("SendEnter to a missing pane: %v", err)
	}
	if err := s.Paste(ctx, Guard{PaneID: "work:0", ServerPID: pid, Repo: "r"}, "hello"); err == nil {
		t.Fatal("Paste accepted a target that is not a pane id")
	}
	if err := s.Paste(ctx, Guard{PaneID: "%0"}, "hello"); err == nil {
		t.Fatal("Paste accepted a guard without server pid and repo")
	}
	if out, err := s.Run(ctx, nil, "list-buffers"); err != nil || out != "" {
		t.Fatalf("buffers left behind: %q, %v", out, err)
	}

	down := unstarted(t)
	err = down.Paste(ctx, Guard{PaneID: "%1", ServerPID: 1, Repo: "r"}, "hello")
	if !errors.Is(err, ErrNotWritten) || !errs.Is(err, errs.Unavailable) || !strings.Contains(err.Error(), down.Name) {
		t.Fatalf("Paste with no server: %v", err)
	}

	// A paste cut off while running may have been written.
	if err := pasteFailed(errs.New(errs.Internal, "killed"), "paste"); errors.Is(err, ErrNotWritten) {
		t.Fatalf("uncertain paste failure marked as not written: %v", err)
	}
}

func TestSendEnterInCopyMode(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	pane, file := recorder(t, ctx, s, false)
	if _, err := s.Run(ctx, nil, "copy-mode", "-t", pane.PaneID); err != nil {
		t.Fatal(err)
	}
	if err := s.SendEnter(ctx, pane); err != nil {
		t.Fatal(err)
	}
	waitFile(t, file, "\r")
}

func BenchmarkPaste(b *testing.B) {
	ctx := ctxFor(b)
	s := private(b)
	pane, file := recorder(b, ctx, s, false)
	const body = "From:bench: a message of ordinary length, about one line of text"
	n := 0
	for b.Loop() {
		n++
		if err := s.Paste(ctx, pane, body); err != nil {
			b.Fatal(err)
		}
		if err := s.SendEnter(ctx, pane); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	testutil.WaitFor(b, "every paste recorded", func() bool {
		fi, err := os.Stat(file)
		return err == nil && fi.Size() == int64(n*(len(body)+1))
	})
}

// A write into a pane whose program has exited is refused, and the server,
// with every other window, survives: tmux 3.3a crashes when something is
// pasted into a dead pane, so without the guard this test kills the server.
func TestGuardRefusesADeadPane(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	live, liveFile := recorder(t, ctx, s, false)
	w, err := s.NewWindow(ctx, "work", "gone", "gone", "", []string{"sh", "-c", "exit 0"}, nil)
	if err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, "the pane to be dead", func() bool { return windowByID(t, ctx, s, w.ID).Dead })
	dead := Guard{PaneID: w.PaneID, ServerPID: live.ServerPID, Repo: "gone"}
	for name, write := range map[string]func() error{
		"paste": func() error { return s.Paste(ctx, dead, "hello") },
		"enter": func() error { return s.SendEnter(ctx, dead) },
	} {
		err := write()
		r := RefusalOf(err)
		if !errors.Is(err, ErrNotWritten) || r == nil || !r.AgentExited || !errs.Is(err, errs.Unavailable) {
			t.Fatalf("%s into a dead pane: %v (%+v)", name, err, r)
		}
	}
	if !s.Alive(ctx) {
		t.Fatal("the tmux server died")
	}
	if err := s.Paste(ctx, live, "still here"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, liveFile, "still here")
	if out, err := s.Run(ctx, nil, "list-buffers"); err != nil || out != "" {
		t.Fatalf("buffers left behind: %q, %v", out, err)
	}
}

// A guard names the server and the repo: the same pane id on another server,
// or in a window marked for another repo, is not written to.
func TestGuardRefusesAnotherServerOrRepo(t *testing.T) {
	ctx := ctxFor(t)
	s := private(t)
	g, file := recorder(t, ctx, s, false)
	cases := map[string]Guard{
		"another server":            {PaneID: g.PaneID, ServerPID: g.ServerPID + 1, Repo: g.Repo},
		"another repo":              {PaneID: g.PaneID, ServerPID: g.ServerPID, Repo: g.Repo + "x"},
		"a repo with format syntax": {PaneID: g.PaneID, ServerPID: g.ServerPID, Repo: "a,b}#{pid}"},
	}
	for name, bad := range cases {
		err := s.Paste(ctx, bad, "wrong")
		if r := RefusalOf(err); !errors.Is(err, ErrRefused) || r == nil || r.AgentExited {
			t.Errorf("%s: %v", name, err)
		}
	}
	// The mark may hold format syntax itself and still match exactly.
	odd := "with space,comma}#{x}"
	if _, err := s.Run(ctx, nil, "set-option", "-w", "-t", g.PaneID, RepoOption, odd); err != nil {
		t.Fatal(err)
	}
	if err := s.Paste(ctx, Guard{PaneID: g.PaneID, ServerPID: g.ServerPID, Repo: odd}, "right"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, file, "right")
}

// Issue 11, item 2: the last line of defence. Whatever let it through, a
// paste that could end the bracketed paste or press a key is not written.
func TestPasteRefusesWhatCouldAct(t *testing.T) {
	t.Parallel()
	ctx := ctxFor(t)
	s := private(t)
	pane, file := recorder(t, ctx, s, true)
	for _, text := range []string{"x\x1b[201~echo pwned\r", "carriage\rreturn", "osc \x1b]52;c;aGk=\a", "c1 \u009b31m", "bidi \u202e"} {
		err := s.Paste(ctx, pane, text)
		if !errors.Is(err, ErrNotWritten) || !errs.Is(err, errs.BodyInvalid) {
			t.Errorf("Paste(%q) = %v", text, err)
		}
	}
	// The pane got nothing of them: the next paste is the first thing in it.
	if err := s.Paste(ctx, pane, "clean"); err != nil {
		t.Fatal(err)
	}
	waitFile(t, file, "\x1b[200~clean\x1b[201~")
}
