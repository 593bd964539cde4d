package doctor

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// TestMain removes the binaries testutil built for the squatter.
func TestMain(m *testing.M) {
	code := m.Run()
	testutil.RemoveBinaries()
	os.Exit(code)
}

// loadWith is tamq's configuration with statehub.api_base set to base.
func loadWith(t *testing.T, base string) *config.Loaded {
	t.Helper()
	dir := t.TempDir()
	return loadEnv(t, map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": dir, paths.StateHubAPIBaseVar: base})
}

// loadEnv is tamq's configuration in the environment env.
func loadEnv(t *testing.T, env map[string]string) *config.Loaded {
	t.Helper()
	p, err := paths.Resolve(paths.Tamq, func(k string) string { return env[k] })
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(p)
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// Security item 1: where State Hub should be, something that is not the
// user's is a failure of the statehub check for both programs (tamq only
// warns about a State Hub that is away), with the client's own words: who
// holds it, and what to do.
func TestDoctorReportsAStateHubAddressOfAnotherUser(t *testing.T) {
	// Anywhere: a file planted where the socket should be.
	planted := filepath.Join(t.TempDir(), "statehub.sock")
	if err := os.WriteFile(planted, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	c, reachable := StateHub(context.Background(), loadWith(t, "unix://"+planted), Warn, "")
	if c.Status != Fail || reachable || !strings.Contains(c.Detail, planted+" is not a socket") || c.Fix == "" {
		t.Errorf("a file at the socket's path: %+v", c)
	}
	t.Run("port of uid 65534", func(t *testing.T) {
		if os.Getuid() != 0 {
			t.Skip("running a listener as uid 65534 needs root (CI runs as root)")
		}
		_, addr := testutil.SquatTCP(t, 65534, "127.0.0.1:0")
		_, port, _ := net.SplitHostPort(addr)
		c, reachable := StateHub(context.Background(), loadWith(t, "http://"+addr), Warn, "")
		if c.Status != Fail || reachable || !strings.Contains(c.Detail, "port "+port) || !strings.Contains(c.Detail, "held by uid 65534") ||
			!strings.Contains(c.Fix, "Unix socket") {
			t.Errorf("a port of another user: %+v", c)
		}
	})
}

// Issue 40, item 13: the default address is the spec's loopback port, and
// the reference server listens on its socket by default. A State Hub that
// does not answer is reported with where its address came from, and the fix
// names the reference server's socket: as where it would listen, or, when
// a State Hub answers there, as the address to set.
func TestDoctorSaysWhichStateHubAddressAndPointsAtTheReferenceServer(t *testing.T) {
	dir := t.TempDir()
	env := map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": dir, "XDG_CONFIG_HOME": filepath.Join(dir, "config"), paths.StateHubAPIBaseVar: "http://127.0.0.1:1"}
	cfg := loadEnv(t, env)
	ref := "unix://" + filepath.Join(dir, "statehub.sock")
	c, _ := StateHub(context.Background(), cfg, Warn, "")
	if !strings.Contains(c.Detail, "(from STATEHUB_API_BASE)") || !strings.Contains(c.Fix, "listens on "+ref+" by default") {
		t.Errorf("nothing anywhere: %+v", c)
	}
	// The reference server on its socket.
	hub := &devhub.Server{}
	if err := hub.Open(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("unix", filepath.Join(dir, "statehub.sock"))
	if err != nil {
		t.Fatal(err)
	}
	srv := hub.HTTPServer()
	go srv.Serve(hub.Listener(ln))
	t.Cleanup(func() { srv.Close() })
	c, _ = StateHub(context.Background(), cfg, Warn, "")
	if want := "a State Hub answers at " + ref; !strings.Contains(c.Fix, want) || !strings.Contains(c.Fix, "STATEHUB_API_BASE="+ref) {
		t.Errorf("the reference server answers on its socket, and the fix does not say %q: %+v", want, c)
	}
	// Without the variable, the address is the spec's default, and says so.
	delete(env, paths.StateHubAPIBaseVar)
	if cfg = loadEnv(t, env); cfg.StateHub.APIBase != "http://127.0.0.1:8000" || cfg.APIBaseOrigin() != "the default: statehub.api_base is not set" {
		t.Errorf("the default State Hub address: %s (%s)", cfg.StateHub.APIBase, cfg.APIBaseOrigin())
	}
}
