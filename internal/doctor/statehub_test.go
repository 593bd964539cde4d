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
	env := map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": dir, paths.StateHubAPIBaseVar: base}
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
