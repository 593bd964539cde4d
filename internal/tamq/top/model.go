package top

import (
	"context"
	"errors"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"

	"github.com/tmux-amq/tamq/internal/engineapi"
)

// MinInterval is the shortest time between two refreshes: each is six
// calls to the services, which must not be kept busy by a view.
const MinInterval = 200 * time.Millisecond

// model is the Bubble Tea shell around Gather and Render: a tick gathers a
// snapshot in a command (off the event loop, so keys and resizes are handled
// while a slow service answers), its arrival re-renders and waits, in
// another command, for either service to change (watch), for at most the
// interval; then the next gather starts, MinInterval after the last began
// at the soonest, so a busy service never has calls piling up.
type model struct {
	gather        func(context.Context) Snapshot
	watch         func(context.Context, Snapshot, time.Duration)
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
	// refreshes are when the recent gathers began, for the rate the title
	// shows.
	refreshes []time.Time
}

// rateWindow is how far back the refresh rate is counted.
const rateWindow = 10 * time.Second

// Actions are what the keys of the loop pane do with the selected task;
// each returns the text to show (what it did, or why it could not).
type Actions struct {
	// Focus switches the tmux client to the window of the task's repo.
	Focus func(ctx context.Context, t engineapi.TaskStanding, s Snapshot) string
	// Explain is coordination-engine's explain of the task.
	Explain func(ctx context.Context, t engineapi.TaskStanding) string
	// Checkpoint is the task's latest checkpoint.
	Checkpoint func(ctx context.Context, t engineapi.TaskStanding) string
}

type snapshotMsg Snapshot

type tickMsg struct{}

// watchedMsg says a service changed or the interval passed.
type watchedMsg struct{}

// overlayMsg is the text an action returned.
type overlayMsg string

func (m model) fetch() tea.Msg { return snapshotMsg(m.gather(context.Background())) }

// await waits for a change of either service, or the interval.
func (m model) await() tea.Cmd {
	snap := m.snap
	return func() tea.Msg {
		m.watch(context.Background(), snap, m.interval)
		return watchedMsg{}
	}
}

// next is the next gather's tick: at once, or when MinInterval since the
// last gather began has passed.
func (m model) next() tea.Cmd {
	began := time.Now()
	if n := len(m.refreshes); n > 0 {
		began = m.refreshes[n-1]
	}
	return tea.Tick(max(time.Until(began.Add(MinInterval)), 0), func(time.Time) tea.Msg { return tickMsg{} })
}

// began records that a gather begins now, keeping those of rateWindow.
func (m *model) began(now time.Time) {
	m.refreshes = append(m.refreshes, now)
	for len(m.refreshes) > 1 && now.Sub(m.refreshes[0]) > rateWindow {
		m.refreshes = m.refreshes[1:]
	}
}

// rate is the refreshes a second over rateWindow.
func (m model) rate() float64 {
	if len(m.refreshes) < 2 {
		return 0
	}
	span := m.refreshes[len(m.refreshes)-1].Sub(m.refreshes[0])
	return float64(len(m.refreshes)-1) / max(span.Seconds(), 1)
}

func (m *model) start() tea.Cmd {
	m.began(time.Now())
	return m.fetch
}

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
		return m, m.await()
	case watchedMsg:
		return m, m.next()
	case tickMsg:
		cmd := m.start() // before m is returned: start records the gather in it
		return m, cmd
	}
	return m, nil
}

// key handles a key: q and Ctrl-C quit, Esc leaves an overlay, the arrows
// (and j, k) pick a task, Enter, e and c act on it. Esc in the main view does
// nothing rather than quit: a second Esc pressed to close what e or c showed
// (or one pressed while their answer is on its way) must not end top.
func (m model) key(k string) (tea.Model, tea.Cmd) {
	tasks := m.snap.Engine.Tasks
	switch k {
	case "q", "ctrl+c":
		return m, tea.Quit
	case "esc":
		m.overlay = ""
		return m, nil
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
		text = Render(m.snap, Options{Width: m.width, Height: m.height, Interval: m.interval, Rate: m.rate(), Interactive: true,
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
func Run(in io.Reader, out io.Writer, interval time.Duration, gather func(context.Context) Snapshot,
	watch func(context.Context, Snapshot, time.Duration), actions Actions) error {
	m := model{gather: gather, watch: watch, actions: actions, interval: interval}
	m.began(time.Now())
	p := tea.NewProgram(m, tea.WithInput(in), tea.WithOutput(out))
	_, err := p.Run()
	// Ctrl-C that reached us as a signal (input not a terminal) is a
	// request to quit like any other, not a failure.
	if errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return err
}
