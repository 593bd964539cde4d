package cli

import (
	"bytes"
	"context"
	"errors"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// completionEnv is a private set of XDG directories with a gita registry
// of real repositories, for tamq's commands run in this process.
type completionEnv map[string]string

func newCompletionEnv(t *testing.T, repos ...string) completionEnv {
	t.Helper()
	root := t.TempDir()
	env := completionEnv{"HOME": root, "XDG_CONFIG_HOME": filepath.Join(root, "c"), "XDG_STATE_HOME": filepath.Join(root, "s"),
		"XDG_RUNTIME_DIR": filepath.Join(root, "r"), "PATH": os.Getenv("PATH")}
	var csv strings.Builder
	for _, name := range repos {
		path := filepath.Join(root, "src", name)
		if out, err := exec.Command("git", "init", "-q", path).CombinedOutput(); err != nil {
			t.Fatalf("git init: %v\n%s", err, out)
		}
		csv.WriteString(testutil.GitaRow(path, name))
	}
	os.MkdirAll(filepath.Join(env["XDG_CONFIG_HOME"], "gita"), 0o755)
	if err := os.WriteFile(filepath.Join(env["XDG_CONFIG_HOME"], "gita", "repos.csv"), []byte(csv.String()), 0o644); err != nil {
		t.Fatal(err)
	}
	return env
}

// run runs tamq in this process and returns its stdout and exit status.
func (env completionEnv) run(args ...string) (string, int) {
	var out, errb bytes.Buffer
	a := &app.App{Program: paths.Tamq, Short: short, Migrations: store.Migrations,
		Getenv: func(k string) string { return env[k] }, Now: time.Now, In: strings.NewReader(""), Out: &out, Err: &errb}
	status := app.Run(a, NewRoot(a), args)
	return out.String(), status
}

// complete asks cobra's __complete and returns the completions and the
// directive line (":N").
func (env completionEnv) complete(t *testing.T, args ...string) ([]string, string) {
	t.Helper()
	out, status := env.run(append([]string{"__complete"}, args...)...)
	if status != 0 {
		t.Fatalf("__complete %q: exit %d", args, status)
	}
	lines := strings.Split(strings.TrimSuffix(out, "\n"), "\n")
	return lines[:len(lines)-1], lines[len(lines)-1]
}

// `tamq send` completes its argument to 'To:<repo>:' for every registered
// repo, with no space after it: the text follows the colon.
func TestSendCompletesAddresses(t *testing.T) {
	t.Parallel()
	env := newCompletionEnv(t, "net-kingdom", "railiance-platform", "with space,comma")
	all := []string{"To:net-kingdom:", "To:railiance-platform:", "To:with space,comma:"}
	for _, c := range []struct {
		typed string
		want  []string
	}{
		{"To:", all},
		{"", all},
		{"T", all},
		{"To:ra", []string{"To:railiance-platform:"}},
		{"To:net-kingdom:", []string{"To:net-kingdom:"}},
		{"To:nope", nil},
		{"To:net-kingdom: hello", nil},
	} {
		got, directive := env.complete(t, "send", c.typed)
		if !slices.Equal(got, c.want) || directive != ":6" { // no space, no files
			t.Errorf("send %q completes to %q %s, want %q :6", c.typed, got, directive, c.want)
		}
	}
	if got, _ := env.complete(t, "send", "To:net-kingdom: hi", ""); len(got) != 0 {
		t.Errorf("a second argument completes to %q", got)
	}
}

// `tamq replay --endpoint` completes the endpoints that are not forgotten,
// with their state and windows: from the service when it runs, else from
// the database, read-only; with neither, nothing, and nothing is created.
func TestReplayCompletesEndpoints(t *testing.T) {
	t.Parallel()
	env := newCompletionEnv(t, "net-kingdom", "railiance")
	if got, directive := env.complete(t, "replay", "x.jsonl", "--endpoint", ""); len(got) != 0 || directive != ":4" {
		t.Errorf("no database: %q %s", got, directive)
	}
	if _, err := os.Stat(filepath.Join(env["XDG_STATE_HOME"], "tamq")); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("completing made the state directory: %v", err)
	}

	p, err := paths.Resolve(paths.Tamq, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	ctx := context.Background()
	st, err := store.Open(ctx, p, time.Second, time.Now)
	if err != nil {
		t.Fatal(err)
	}
	// Server pids no process has: the service finds their servers gone.
	for _, ep := range []queue.Endpoint{
		{ID: "tmux-amq-4000001", TmuxSocket: "/tmp/a", ServerPID: 4000001, Session: "tamq",
			Windows: []queue.Window{{Repo: "net-kingdom", RepoPath: "/src/n", WindowID: "@1", PaneID: "%1", Mode: queue.Trigger}}},
		{ID: "tmux-amq-4000002", TmuxSocket: "/tmp/b", ServerPID: 4000002, Session: "tamq",
			Windows: []queue.Window{{Repo: "railiance", RepoPath: "/src/r", WindowID: "@2", PaneID: "%2", Mode: queue.Manual}}},
		{ID: "tmux-amq-5000003", TmuxSocket: "/tmp/c", ServerPID: 5000003, Session: "tamq"},
	} {
		if err := st.Endpoints.Register(ctx, ep); err != nil {
			t.Fatal(err)
		}
	}
	if err := st.Endpoints.SetEndpointState(ctx, "tmux-amq-5000003", queue.Disconnected, "gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := st.Endpoints.Forget(ctx, "tmux-amq-5000003"); err != nil {
		t.Fatal(err)
	}
	st.DB.Close()

	got, directive := env.complete(t, "replay", "x.jsonl", "--endpoint", "")
	slices.Sort(got)
	want := []string{"tmux-amq-4000001\tconnected: net-kingdom", "tmux-amq-4000002\tconnected: railiance"}
	if !slices.Equal(got, want) || directive != ":4" {
		t.Errorf("from the database: %q %s, want %q", got, directive, want)
	}
	if got, _ := env.complete(t, "replay", "x.jsonl", "--endpoint", "tmux-amq-4000001"); len(got) != 1 {
		t.Errorf("by prefix: %q", got)
	}

	served := make(chan int, 1)
	go func() { _, status := env.run("serve"); served <- status }()
	testutil.WaitFor(t, "the service", func() bool { _, status := env.run("ping"); return status == 0 })
	defer func() {
		// Not `tamq stop`: it waits for the service's process to exit,
		// and that process is this test's.
		if _, err := client.New(p).Stop(ctx); err != nil {
			t.Error(err)
		}
		if status := <-served; status != 0 {
			t.Errorf("serve exited %d", status)
		}
	}()
	testutil.WaitFor(t, "the service to find the servers gone", func() bool {
		got, _ := env.complete(t, "replay", "x.jsonl", "--endpoint", "")
		slices.Sort(got)
		return slices.Equal(got, []string{"tmux-amq-4000001\tdisconnected: net-kingdom", "tmux-amq-4000002\tdisconnected: railiance"})
	})
}
