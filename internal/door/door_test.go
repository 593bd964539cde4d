package door

import (
	"context"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The one table of who may call what, as docs/security.md lists it.
func TestAllows(t *testing.T) {
	p := Policy{TamqSocket: "/run/tamq.sock", EngineSocket: "/run/ce.sock"}
	op, agent, tamq, engine := Caller{Kind: Operator}, Caller{Kind: Agent, Repo: "alpha"}, Caller{Kind: Tamq}, Caller{Kind: Engine}
	unplaced := Caller{Kind: Unverified, Why: "run in a window of tamq's session that is no repo's"}
	down := Caller{Kind: Unverified, Why: "run under a tmux server of tamq's windows", Down: true}
	const ok, no, later = "", errs.PermissionDeny, errs.Unavailable
	for _, c := range []struct {
		a    Access
		want [6]errs.Code // operator, agent, tamq, engine, unplaced, down
	}{
		{Anyone, [6]errs.Code{ok, ok, ok, ok, ok, ok}},
		{TamqOnly, [6]errs.Code{no, no, ok, no, no, no}},
		{EngineOnly, [6]errs.Code{no, no, no, ok, no, no}},
		{OperatorOnly, [6]errs.Code{ok, no, no, no, no, later}},
		{Window, [6]errs.Code{ok, ok, no, no, no, later}},
		{WindowOrTamq, [6]errs.Code{ok, ok, ok, no, no, later}},
	} {
		for i, who := range []Caller{op, agent, tamq, engine, unplaced, down} {
			err := p.Allows(c.a, who, "the op")
			if got := errs.CodeOf(err); err == nil && c.want[i] != ok || err != nil && got != c.want[i] {
				t.Errorf("access %d, %s: %v, want %q", c.a, who, err, c.want[i])
			}
		}
	}
	if err := p.Allows(OperatorOnly, unplaced, "wake"); err == nil || !strings.Contains(err.Error(), "wake is refused: you run in a window of tamq's session") {
		t.Errorf("the refusal of an unplaced caller does not say why: %v", err)
	}
}

func TestOwns(t *testing.T) {
	if err := Owns(Caller{Kind: Agent, Repo: "alpha"}, "message M", "gamma"); errs.CodeOf(err) != errs.PermissionDeny ||
		!strings.Contains(err.Error(), "message M belongs to gamma; the agent in alpha's window may act only on alpha's") {
		t.Errorf("another repo's: %v", err)
	}
	for _, c := range []Caller{{Kind: Agent, Repo: "gamma"}, {Kind: Operator}} {
		if err := Owns(c, "message M", "gamma"); err != nil {
			t.Errorf("%s: %v", c, err)
		}
	}
}

// Place never makes the operator of a process anything about which says it
// belongs near a window or an agent; the environment only ever refuses.
func TestPlace(t *testing.T) {
	for _, c := range []struct {
		u    Unplaced
		kind Kind
		why  string
		down bool
	}{
		{Unplaced{}, Operator, "", false},
		{Unplaced{UnderTamqTmux: true, Listed: true, InPane: true}, Operator, "", false}, // the user's own pane, own session
		{Unplaced{UnderTamqTmux: true}, Unverified, "run under a tmux server of tamq's windows", true},
		{Unplaced{UnderTamqTmux: true, Listed: true, InPane: true, PaneRepo: "alpha"}, Unverified, "another pane of alpha's window", false},
		{Unplaced{UnderTamqTmux: true, Listed: true, InPane: true, TamqSession: true}, Unverified, "a window of tamq's session", false},
		{Unplaced{UnderTamqTmux: true, Listed: true}, Unverified, "in none of its panes", false},
		{Unplaced{EnvRepo: "alpha"}, Unverified, "started from alpha's window and left it", false},
		{Unplaced{AgentAbove: "Claude Code"}, Unverified, "run under Claude Code outside tamq's windows", false},
		{Unplaced{UnderTamqTmux: true, Listed: true, InPane: true, EnvRepo: "alpha"}, Unverified, "started from alpha's window", false},
	} {
		got := Place(c.u)
		if got.Kind != c.kind || !strings.Contains(got.Why, c.why) || got.Down != c.down {
			t.Errorf("Place(%+v) = %+v, want %s %q down=%v", c.u, got, c.kind, c.why, c.down)
		}
	}
}

func TestMarks(t *testing.T) {
	for env, want := range map[string][2]string{
		"TAMQ_REPO=alpha":                  {"alpha", ""},
		"CLAUDECODE=1":                     {"", "Claude Code"},
		"GEMINI_CLI=1":                     {"", "Gemini CLI"},
		"CODEX_SANDBOX_NETWORK_DISABLED=1": {"", "Codex"},
		"HOME=/root":                       {"", ""},
	} {
		k, v, _ := strings.Cut(env, "=")
		repo, agent := Marks(map[string]string{k: v})
		if repo != want[0] || agent != want[1] {
			t.Errorf("%s: %q %q, want %q", env, repo, agent, want)
		}
	}
}

func TestCallerTravelsInTheContext(t *testing.T) {
	if c := CallerOf(context.Background()); c.Kind != Operator {
		t.Errorf("no caller: %+v, want the operator (the daemon's own work)", c)
	}
	ctx := WithCaller(context.Background(), Caller{Kind: Agent, Repo: "alpha"})
	if c := CallerOf(ctx); c.Kind != Agent || c.Repo != "alpha" {
		t.Errorf("got %+v", c)
	}
}
