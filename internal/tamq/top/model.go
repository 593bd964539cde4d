package top

import (
	"context"
	"errors"
	"io"
	"time"

	tea "charm.land/bubbletea/v2"
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
	interval      time.Duration
	snap          Snapshot
	have          bool
	width, height int
}

type snapshotMsg Snapshot

type tickMsg struct{}

func (m model) fetch() tea.Msg { return snapshotMsg(m.gather(context.Background())) }

func (m model) Init() tea.Cmd { return m.fetch }

func (m model) Update(msg tea.Msg) (tea.Model, tea.Cmd) {
	switch msg := msg.(type) {
	case tea.KeyPressMsg:
		switch msg.String() {
		case "q", "ctrl+c", "esc":
			return m, tea.Quit
		}
	case tea.WindowSizeMsg:
		m.width, m.height = msg.Width, msg.Height
	case snapshotMsg:
		m.snap, m.have = Snapshot(msg), true
		return m, tea.Tick(m.interval, func(time.Time) tea.Msg { return tickMsg{} })
	case tickMsg:
		return m, m.fetch
	}
	return m, nil
}

func (m model) View() tea.View {
	text := "tamq top: asking the services…  q quits\n"
	if m.have {
		text = Render(m.snap, Options{Width: m.width, Height: m.height, Interval: m.interval, Interactive: true})
	}
	v := tea.NewView(text)
	// The alternate screen: quitting gives the terminal back as it was.
	v.AltScreen = true
	return v
}

// Run shows the refreshing view on the terminal at in and out until q,
// Ctrl-C, Esc or SIGTERM; Bubble Tea restores the terminal (main screen,
// cursor, cooked mode) on every one of them.
func Run(in io.Reader, out io.Writer, interval time.Duration, gather func(context.Context) Snapshot) error {
	p := tea.NewProgram(model{gather: gather, interval: interval}, tea.WithInput(in), tea.WithOutput(out))
	_, err := p.Run()
	// Ctrl-C that reached us as a signal (input not a terminal) is a
	// request to quit like any other, not a failure.
	if errors.Is(err, tea.ErrInterrupted) {
		return nil
	}
	return err
}
