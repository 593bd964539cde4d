package broker

// Screen is what an agent's terminal shows at one moment: its rows of text
// (trailing spaces trimmed), the cursor, the window title and whether the
// alternate screen is up. The broker reads it off its model; a window
// without a broker can build the same from `tmux capture-pane -p` and
// #{cursor_x}, #{cursor_y}, #{cursor_flag}, #{pane_title},
// #{alternate_on}.
type Screen struct {
	Rows []string
	// Cols is the screen's width (#{pane_width}); 0: the widest row's.
	Cols          int
	CursorX       int
	CursorY       int
	CursorVisible bool
	Title         string
	AltScreen     bool
	// Status is the agent's last Program Status Protocol state (OSC 7501):
	// "idle", "working", "done", "blocked:permission", …; "" when it has
	// reported none.
	Status string
	// Agent is the program drawing it, as AgentOf names it: "claude",
	// "codex", or "" for any other (a shell, a REPL).
	Agent string
	// NoBracketedPaste says the agent has not turned bracketed paste on
	// (or turned it off again), as the broker's model saw; false where that
	// is not known (a screen read from tmux).
	NoBracketedPaste bool
	// Stale says the picture missed some of the agent's output.
	Stale bool
	// Drawing says the agent is midway through a frame it asked to have
	// shown at once (synchronized output, mode 2026).
	Drawing bool
	// Seq counts the chunks of output applied when it was read.
	Seq uint64
}
