package tmux

import (
	"context"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Capture is what a pane shows: its rows, the cursor, the title and whether
// the alternate screen is up.
type Capture struct {
	Rows          []string
	Width         int
	CursorX       int
	CursorY       int
	CursorVisible bool
	AltScreen     bool
	Title         string
}

// captureFormat puts the free-text title last, after its byte length.
const captureFormat = "#{pane_id}\x1f#{cursor_x}\x1f#{cursor_y}\x1f#{cursor_flag}\x1f#{alternate_on}\x1f#{pane_width}\x1f#{n:pane_title}\x1f#{pane_title}"

// Capture reads what the pane shows, in one tmux call, to tell whether the
// program in it is at its input prompt before a write (for windows without
// a broker). It never reads what an agent wrote to route it.
func (s Server) Capture(ctx context.Context, paneID string) (Capture, error) {
	if err := checkPane(paneID); err != nil {
		return Capture{}, err
	}
	out, err := s.Run(ctx, nil, "display-message", "-p", "-t", paneID, captureFormat, ";", "capture-pane", "-p", "-t", paneID)
	if err != nil {
		return Capture{}, err
	}
	c, ok := parseCapture(paneID, out)
	if !ok {
		return Capture{}, errs.New(errs.Internal, "tmux %s: unexpected capture of %s", s, paneID)
	}
	return c, nil
}

// parseCapture reads the output of Capture's tmux call: the fields of
// captureFormat, then the rows; ok is false when it is not that.
func parseCapture(paneID, out string) (Capture, bool) {
	f := strings.SplitN(out, "\x1f", 8)
	if len(f) != 8 || f[0] != paneID {
		return Capture{}, false
	}
	var n [6]int
	for i := range n {
		var err error
		if n[i], err = strconv.Atoi(f[i+1]); err != nil {
			return Capture{}, false
		}
	}
	titleLen, rest := n[5], f[7]
	// A negative length would index before the title.
	if titleLen < 0 || len(rest) <= titleLen || rest[titleLen] != '\n' {
		return Capture{}, false
	}
	c := Capture{CursorX: n[0], CursorY: n[1], CursorVisible: n[2] == 1, AltScreen: n[3] == 1, Width: n[4], Title: rest[:titleLen]}
	for _, row := range strings.Split(strings.TrimSuffix(rest[titleLen+1:], "\n"), "\n") {
		c.Rows = append(c.Rows, strings.TrimRight(row, " "))
	}
	return c, true
}

// CapturePane returns the pane's visible text, for tests and diagnostics; it
// is never used to read what an agent wrote.
func (s Server) CapturePane(ctx context.Context, paneID string) (string, error) {
	if err := checkPane(paneID); err != nil {
		return "", err
	}
	return s.Run(ctx, nil, "capture-pane", "-p", "-J", "-t", paneID)
}
