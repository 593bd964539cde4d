package top

import (
	"context"
	"errors"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// MinInterval is the shortest refresh period: each refresh is three calls to
// the services, which must not be kept busy by a view.
const MinInterval = 200 * time.Millisecond

// model is the Bubble Tea shell around Gather and Render: a tick gathers a
// snapshot in a command (off the event loop, so keys and resizes are handled
// while a slow service answers), its arrival re-renders and schedules the
// next tick. The next gather starts one interval after the last one ended, so
// a slow service never has calls piling up.
type model struct {
	gather        func(context.Context) Snapshot
	actions       Actions
	interval      time.Duration
	snap          Snapshot
	have          bool
	width, height int
	// selected is the row of the loop pane the arrows picked, followed by
	// its task id across refreshes; overlay is what Enter, e or c showed.
	selected   int
	selectedID string
	overlay    string
}

// Actions are what the keys of the loop pane do with the selected task;
// each returns the text to show (what it did, or why it could not).
type Actions struct {
	// Focus switches the tmux client to the window of the task's repo.
	Focus func(ctx context.Context, t api.TaskStanding, s Snapshot) string
	// Explain is coordination-engine's explain of the task.
	Explain func(ctx context.Context, t api.TaskStanding) string
	// Checkpoint is the task's latest checkpoint.
	Checkpoint func(ctx context.Context, t api.TaskStanding) string
}

type snapshotMsg Snapshot

type tickMsg struct{}

// overlayMsg is the text an action returned.
type overlayMsg string

func (m model) fetch() tea.Msg { return snapshotMsg(m.gather(context.Background())) }

func (m model) Init() tea.Cmd { return m.fetch }

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		return m.key(msg.String())
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case overlayMsg:
		m.overlay = string(msg)
	case snapshotMsg:
		m.snap, m.have = Snapshot(msg), true
		m.follow()
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.fetch
	}
	return m, nil
}

// key handles a key: q and Ctrl-C quit, Esc leaves an overlay or quits,
// the arrows (and j, k) pick a task, Enter, e and c act on it.
func (m model) key(k string) (tea.Model, tea.Cmd) {
	tasks := m.snap.Engine.Tasks
	switch k {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "esc":
		if m.overlay != "" {
			m.overlay = ""
			return m, nil
		}
		return m, tea.Quit
	case "up", "k":
		m.pick(m.selected - 1)
	case "down", "j":
		m.pick(m.selected + 1)
	case "enter", "e", "c":
		if m.selected >= len(tasks) {
			return m, nil
		}
		t, snap := tasks[m.selected], m.snap
		act := map[string]func(context.Context) string{
			"enter": func(ctx context.Context) string { return m.actions.Focus(ctx, t, snap) },
			"e":     func(ctx context.Context) string { return m.actions.Explain(ctx, t) },
			"c":     func(ctx context.Context) string { return m.actions.Checkpoint(ctx, t) },
		}[k]
		// Off the event loop, as a gather is: a slow service must not
		// freeze the keys.
		return m, func() tea.Msg { return overlayMsg(act(context.Background())) }
	}
	return m, nil
}

// pick selects row i of the loop pane, within its rows.
func (m *model) pick(i int) {
	tasks := m.snap.Engine.Tasks
	if len(tasks) == 0 {
		return
	}
	m.selected = min(max(i, 0), len(tasks)-1)
	m.selectedID = tasks[m.selected].ID
}

// follow keeps the selection on the same task when a refresh moved it, and
// within the rows when it left.
func (m *model) follow() {
	for i, t := range m.snap.Engine.Tasks {
		if t.ID == m.selectedID {
			m.selected = i
			return
		}
	}
	m.pick(m.selected)
}

func (m model) View() tea.View {
	text := "tamq top: asking the services…  q quits\n"
	if m.have {
		text = Render(m.snap, Options{Width: m.width, Height: m.height, Interval: m.interval, Interactive: true,
			Selected: m.selected, Overlay: m.overlay})
	}
	v := tea.NewView(text)
	// The alternate screen: quitting gives the terminal back as it was.
	v.AltScreen = true
	return v
}

// Run shows the refreshing view on the terminal at in and out, the keys of
// the loop pane doing actions, until q, Ctrl-C, Esc or SIGTERM; Bubble Tea restores the terminal (main screen,
// cursor, cooked mode) on every one of them.
func Run(in io.Reader, out io.Writer, interval time.Duration, gather func(context.Context) Snapshot, actions Actions) error {
	p := tea.NewProgram(model{gather: gather, actions: actions, interval: interval}, tea.WithInput(in), tea.WithOutput(out))
	_, err := p.Run()
	// Ctrl-C that reached us as a signal (input not a terminal) is a
	// request to quit like any other, not a failure.
	if errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return err
}
