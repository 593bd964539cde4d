package top

import (
	"context"
	"strings"
	"testing"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func loopSnapshot(ids ...string) Snapshot {
	e := engineUp()
	e.Status.Tasks = engineapi.TaskCounts{"needs_you": 1, "working": len(ids) - 1}
	for i, id := range ids {
		kind, words := "working", "working: lease L-"+id+" attempt 1"
		if i == 0 {
			kind, words = "needs_you", "needs you: secret required"
		}
		e.Tasks = append(e.Tasks, engineapi.TaskStanding{ID: id, Repo: "repo-" + id, Kind: kind, Words: words})
	}
	return Snapshot{At: at, Tamq: tamqUp(), Engine: e}
}

// The loop pane: the counts, then a row a task; the picked row is marked in
// the interactive view only; a hostile standing is shown inert.
func TestTheLoopPaneListsWhatNeedsThePerson(t *testing.T) {
	s := loopSnapshot("T-1", "T-2")
	s.Engine.Tasks[1].Words = "working: \x1b]0;pwned\x07 lease"
	once := Render(s, Options{})
	if !strings.Contains(once, "loop: 1 need you · 1 working\n") || !strings.Contains(once, "    T-1  repo-T-1  needs you: secret required\n") ||
		strings.Contains(once, "> ") || !textsafe.Inert(once) {
		t.Errorf("--once:\n%s", once)
	}
	live := Render(s, Options{Interactive: true, Selected: 1})
	if !strings.Contains(live, "  > T-2") || !strings.Contains(live, "(↑↓ pick, Enter: its window, e: explain, c: checkpoint)") {
		t.Errorf("interactive:\n%s", live)
	}
	shown := Render(s, Options{Interactive: true, Overlay: "explain T-2: \x1b[2Jworking"})
	if !strings.Contains(shown, "explain T-2: ") || strings.Contains(shown, "tamq: running") || !textsafe.Inert(shown) {
		t.Errorf("with an overlay:\n%s", shown)
	}
	down := Render(Snapshot{At: at, Tamq: tamqUp(), Engine: EngineSource{Error: NotRunning}}, Options{})
	if !strings.Contains(down, "loop: coordination-engine not running\n") {
		t.Errorf("engine down:\n%s", down)
	}
}

// The keys: the arrows and j/k pick within the rows, the pick follows its
// task across a refresh, Enter, e and c run their action on the picked task
// off the event loop, Esc leaves what they showed, then quits.
func TestTheLoopPaneKeys(t *testing.T) {
	var asked []string
	act := func(what string) func(context.Context, engineapi.TaskStanding) string {
		return func(_ context.Context, task engineapi.TaskStanding) string {
			asked = append(asked, what+" "+task.ID)
			return what + " of " + task.ID
		}
	}
	m := model{actions: Actions{
		Focus: func(ctx context.Context, task engineapi.TaskStanding, _ Snapshot) string {
			return act("focus")(ctx, task)
		},
		Explain:    act("explain"),
		Checkpoint: act("checkpoint"),
	}}
	update := func(msg tea.Msg) tea.Cmd {
		next, cmd := m.Update(msg)
		m = next.(model)
		return cmd
	}
	press := func(k string) tea.Cmd {
		var key tea.Key
		switch k {
		case "up":
			key = tea.Key{Code: tea.KeyUp}
		case "down":
			key = tea.Key{Code: tea.KeyDown}
		case "enter":
			key = tea.Key{Code: tea.KeyEnter}
		case "esc":
			key = tea.Key{Code: tea.KeyEscape}
		default:
			key = tea.Key{Code: rune(k[0]), Text: k}
		}
		return update(tea.KeyPressMsg(key))
	}
	update(snapshotMsg(loopSnapshot("T-1", "T-2", "T-3")))
	press("down")
	press("j")
	press("j") // past the last row: stays there
	if m.selected != 2 || m.selectedID != "T-3" {
		t.Fatalf("after down, j, j: row %d (%s)", m.selected, m.selectedID)
	}
	press("k")
	// A refresh that moves T-2 keeps it picked.
	update(snapshotMsg(loopSnapshot("T-1", "T-9", "T-2")))
	if m.selected != 2 || m.selectedID != "T-2" {
		t.Fatalf("after a refresh: row %d (%s)", m.selected, m.selectedID)
	}
	for _, k := range []string{"enter", "e", "c"} {
		cmd := press(k)
		if cmd == nil {
			t.Fatalf("%s ran nothing", k)
		}
		update(cmd())
	}
	if strings.Join(asked, ", ") != "focus T-2, explain T-2, checkpoint T-2" || m.overlay != "checkpoint of T-2" {
		t.Errorf("actions %v, overlay %q", asked, m.overlay)
	}
	if cmd := press("esc"); cmd != nil || m.overlay != "" {
		t.Errorf("esc with an overlay: %q left, quit %v", m.overlay, cmd != nil)
	}
	// A second Esc (one too many after e or c) leaves top running.
	if cmd := press("esc"); cmd != nil || m.overlay != "" {
		t.Errorf("esc with nothing shown: %q shown, ran a command (quit) %v", m.overlay, cmd != nil)
	}
	if cmd := press("q"); cmd == nil {
		t.Error("q did not quit")
	}
	// Rows gone: the pick stays within what is there, and Enter does nothing.
	update(snapshotMsg(Snapshot{At: at, Tamq: tamqUp(), Engine: engineUp()}))
	if cmd := press("enter"); cmd != nil {
		t.Error("enter with no rows ran an action")
	}
}

// Each refresh is counted for the rate the title shows: ticks come as the
// services change, and the rate is over the last ten seconds.
func TestTheRefreshRateCountsEachRefresh(t *testing.T) {
	m := model{gather: func(context.Context) Snapshot { return Snapshot{} }}
	for range 3 {
		next, cmd := m.Update(tickMsg{})
		m = next.(model)
		if cmd == nil {
			t.Fatal("a tick gathered nothing")
		}
	}
	if len(m.refreshes) != 3 {
		t.Errorf("%d refreshes recorded, want 3", len(m.refreshes))
	}
	base := time.Date(2026, 12, 5, 9, 0, 0, 0, time.UTC)
	m.refreshes = nil
	for i := range 5 {
		m.began(base.Add(time.Duration(i) * 2 * time.Second)) // one every 2 s over 8 s
	}
	m.began(base.Add(16 * time.Second)) // those before 6 s fall out of the window
	if got := m.rate(); len(m.refreshes) != 3 || got != 0.2 {
		t.Errorf("rate %v over %d refreshes", got, len(m.refreshes))
	}
}
