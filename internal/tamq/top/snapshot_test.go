package top

import (
	"context"
	"net"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/paths"
)

// A service that takes the connection and never answers costs one frame the
// call timeout, shows as that source's error, and hides nothing of the other.
func TestGatherBoundsAHungService(t *testing.T) {
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o700); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{"HOME": dir, "XDG_RUNTIME_DIR": dir, "XDG_STATE_HOME": dir, "XDG_CONFIG_HOME": dir}
	resolve := func(p paths.Program) paths.Paths {
		r, err := paths.Resolve(p, func(k string) string { return env[k] })
		if err != nil {
			t.Fatal(err)
		}
		return r
	}
	tp, ep := resolve(paths.Tamq), resolve(paths.Engine)
	ln, err := net.Listen("unix", tp.Socket)
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	go func() {
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			defer c.Close() // held open, never answered
		}
	}()

	start := time.Now()
	at := time.Date(2026, 12, 2, 10, 1, 46, 123456789, time.UTC)
	s := Gather(context.Background(), Sources{Tamq: tp, Engine: ep, Timeout: 300 * time.Millisecond, Now: func() time.Time { return at }})
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("gather took %s with a 300ms timeout", took)
	}
	if s.Tamq.Running || s.Tamq.Error == "" || s.Tamq.Error == NotRunning {
		t.Errorf("hung tamq: %+v", s.Tamq)
	}
	if s.Engine.Running || s.Engine.Error != NotRunning || s.Engine.ReceiptsError != "" {
		t.Errorf("absent engine: %+v", s.Engine)
	}
	if !s.At.Equal(at.Truncate(time.Millisecond)) {
		t.Errorf("at %s", s.At)
	}
	t.Logf("hung tamq: %s", s.Tamq.Error)
	out := Render(s, Options{})
	if !strings.Contains(out, "tamq: "+s.Tamq.Error) || !strings.Contains(out, "coordination-engine: not running") {
		t.Errorf("frame:\n%s", out)
	}
}
