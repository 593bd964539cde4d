package queue

import "testing"

// How a window's agent ended, in words, and which ends a restart after a
// reboot reads as the shutdown's own.
func TestAgentEnds(t *testing.T) {
	for _, c := range []struct {
		w        Window
		text     string
		shutdown bool
	}{
		{Window{ExitStatus: -1}, "", false},
		{Window{Ended: AgentExited, ExitStatus: 0}, "its agent exited with status 0", false},
		{Window{Ended: AgentExited, ExitStatus: 127}, "its agent exited with status 127 (command not found)", false},
		{Window{Ended: AgentExited, ExitStatus: 126}, "its agent exited with status 126 (command found but not executable)", false},
		{Window{Ended: AgentExited, ExitStatus: 130}, "its agent exited with status 130 (ended by signal 2, interrupt)", false},
		{Window{Ended: AgentExited, ExitStatus: 143}, "its agent exited with status 143 (ended by signal 15, terminated)", true},
		{Window{Ended: AgentExited, ExitStatus: 129}, "its agent exited with status 129 (ended by signal 1, hangup)", true},
		{Window{Ended: AgentExited, ExitStatus: -1}, "its agent exited", false},
		{Window{Ended: WindowClosed, ExitStatus: -1}, "its window was closed", false},
	} {
		if got := c.w.EndText(); got != c.text {
			t.Errorf("%+v: %q, want %q", c.w, got, c.text)
		}
		if got := c.w.EndedByShutdown(); got != c.shutdown {
			t.Errorf("%+v: ended by a shutdown %v", c.w, got)
		}
	}
}
