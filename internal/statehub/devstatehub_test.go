package statehub_test

import (
	"bufio"
	"context"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// devStateHub runs `coordination-engine dev-statehub args...` until the
// test ends and returns the lines it wrote up to the one saying where it
// listens, its last at start, and that address.
func devStateHub(t *testing.T, e *testutil.Env, args ...string) (notes []string, url string) {
	t.Helper()
	cmd := e.Command(context.Background(), "coordination-engine", append([]string{"dev-statehub"}, args...)...)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { cmd.Process.Signal(syscall.SIGINT); cmd.Wait() })
	sc := bufio.NewScanner(stderr)
	for sc.Scan() {
		notes = append(notes, sc.Text())
		if _, rest, ok := strings.Cut(sc.Text(), "reference State Hub on "); ok {
			url = strings.Fields(rest)[0]
			go func() {
				for sc.Scan() {
				}
			}()
			return notes, url
		}
	}
	t.Fatalf("dev-statehub did not start: %q", notes)
	return nil, ""
}

// defaultConfig is the engine's configuration in e with no file: where it
// looks for State Hub by default.
func defaultConfig(t *testing.T, e *testutil.Env) *config.Loaded {
	t.Helper()
	cfg, err := config.Load(e.Paths(t, paths.Engine))
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Security items 1 and 7: the reference State Hub listens by default on a
// 0600 socket in the runtime directory, where both programs' default
// statehub.api_base points: the loop closes with no setting, and no token,
// since no one else can connect.
func TestDevStateHubListensOnTheUsersSocketByDefault(t *testing.T) {
	e := testutil.NewEnv(t)
	if err := os.MkdirAll(e.Runtime, 0o700); err != nil {
		t.Fatal(err)
	}
	_, url := devStateHub(t, e)
	sock := filepath.Join(e.Runtime, "statehub.sock")
	cfg := defaultConfig(t, e)
	if url != "unix://"+sock || cfg.StateHub.APIBase != url {
		t.Fatalf("listens on %s; the default api_base is %s", url, cfg.StateHub.APIBase)
	}
	if fi, err := os.Stat(sock); err != nil || fi.Mode().Perm() != 0o600 {
		t.Errorf("the socket: %v %v", fi, err)
	}
	c := &statehub.Client{Base: cfg.StateHub.APIBase}
	if _, _, _, err := c.Workplans(context.Background()); err != nil {
		t.Errorf("the default client: %v", err)
	}
	if _, err := os.Stat(filepath.Join(e.EngineState(), "statehub.token")); err == nil {
		t.Error("a token was made for the socket")
	}
}

// Security item 7: on TCP a token is required by default: made at the
// first start into a 0600 file whose path is printed, with the setting
// that reads it; without it a request is refused, with it served. An
// address other machines may reach is refused without a token.
func TestDevStateHubOnTCPNeedsAToken(t *testing.T) {
	e := testutil.NewEnv(t)
	notes, url := devStateHub(t, e, "--listen", "127.0.0.1:0")
	file := filepath.Join(e.EngineState(), "statehub.token")
	if !strings.HasPrefix(url, "http://127.0.0.1:") || !strings.Contains(strings.Join(notes, "\n"), `credential_command = ["cat", "`+file+`"]`) {
		t.Fatalf("%s: %q", url, notes)
	}
	if fi, err := os.Stat(file); err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("the token file: %v %v", fi, err)
	}
	if _, _, _, err := (&statehub.Client{Base: url}).Workplans(context.Background()); !errs.Is(err, errs.PermissionDeny) {
		t.Errorf("without the token: %v", err)
	}
	if _, _, _, err := (&statehub.Client{Base: url, Credential: []string{"cat", file}}).Workplans(context.Background()); err != nil {
		t.Errorf("with the token file: %v", err)
	}
	r := e.Run(t, "coordination-engine", "dev-statehub", "--listen", "0.0.0.0:0", "--no-token")
	if r.Status != 9 || !strings.Contains(r.Stderr, "other machines may reach") {
		t.Errorf("a tokenless address other machines reach: %s", r)
	}
}
