package service_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// pathsOf resolves tamq's paths in a test's environment.
func pathsOf(t testing.TB, e *testutil.Env) paths.Paths { return e.Paths(t, paths.Tamq) }

// The typed client reaches every lifecycle operation of a real service; hello
// offers exactly the operations the service answers.
func TestTypedClient(t *testing.T) {
	t.Parallel()
	e := testutil.NewEnv(t)
	c := client.New(pathsOf(t, e))
	ctx := context.Background()
	var e1 *errs.Error
	if _, err := c.Ping(ctx); !errors.As(err, &e1) || e1.Code != errs.Unavailable || !strings.Contains(e1.Hint, "tamq start --detach") {
		t.Fatalf("ping with no service: %v", err)
	}
	pid := startDetached(t, e)
	hello, err := c.Hello(ctx, "tamq-test")
	if err != nil {
		t.Fatal(err)
	}
	want := []string{"ack", "broker_session", "cancel", "cancel_wake", "changes", "delivery_current", "endpoints", "forget_endpoint", "hello", "ping", "purge", "register", "replay",
		"restore", "retry", "send", "shutdown", "status", "wake", "wake_held", "whois"}
	if hello.Server != "tamq" || hello.Proto == "" || !slices.Equal(hello.Capabilities, want) {
		t.Errorf("hello = %+v", hello)
	}
	if ping, err := c.Ping(ctx); err != nil || ping.PID != pid {
		t.Errorf("ping = %+v, %v", ping, err)
	}
	if st, err := c.Status(ctx); err != nil || !st.Service.Running || st.Service.PID != pid {
		t.Errorf("status = %+v, %v", st.Service, err)
	}
	if eps, err := c.Endpoints(ctx, true); err != nil || len(eps.Endpoints) != 0 {
		t.Errorf("endpoints = %+v, %v", eps, err)
	}
	if _, err := c.Ack(ctx, "00000000-0000-7000-8000-000000000000"); !errs.Is(err, errs.NotFound) {
		t.Errorf("ack of no message: %v", err)
	}
	if res, err := c.Stop(ctx); err != nil || res.PID != pid {
		t.Errorf("stop = %+v, %v", res, err)
	}
}
