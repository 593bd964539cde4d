package broker

import (
	"reflect"
	"strings"
	"testing"
	"time"
)

// What ends a block besides an empty line: the screen redrawn, the cursor
// leaving the block's rows (issue 10, A2), and what counts as a redraw of
// one already sent (A3).
func TestBlockEdges(t *testing.T) {
	tests := []struct {
		name    string
		rows    int
		out     string
		want    []Block
		notices []string
	}{
		{"a shell prompt and a later command are not part of the block",
			24, "To:net: built\r\n\x1b[2J\x1b[H$ ls\r\nfile\r\n", []Block{{"net", "built", false}}, nil},
		{"clear screen ends the block", 24, "To:net: one\r\ntwo\r\n\x1b[2Jthree\r\n", []Block{{"net", "one\ntwo", false}}, nil},
		{"reset ends the block", 24, "To:net: one\r\n\x1bcthree\r\n", []Block{{"net", "one", false}}, nil},
		{"the alternate screen ends the block", 24, "To:net: one\r\n\x1b[?1049hmenu\r\n\x1b[?1049lafter\r\n",
			[]Block{{"net", "one", false}}, nil},
		{"cursor up ends the block", 24, "To:net: one\r\ntwo\r\n\x1b[1Aedited\r\n", []Block{{"net", "one\ntwo", false}}, nil},
		{"cursor far down ends the block", 24, "To:net: one\x1b[20;1Hstatus bar\r\n", []Block{{"net", "one", false}}, nil},
		{"cursor to the next row goes on", 24, "To:net: one\x1b[2;1Htwo\r\n\r\n", []Block{{"net", "one\ntwo", false}}, nil},
		{"the same block printed twice on new rows is two messages", 24,
			"To:net: deploy done\r\n\r\nTo:net: deploy done\r\n\r\n", []Block{{"net", "deploy done", false}, {"net", "deploy done", false}}, nil},
		{"printed twice after scrolling is two messages", 3,
			"x\r\ny\r\nTo:net: again\r\n\r\nTo:net: again\r\n\r\n", []Block{{"net", "again", false}, {"net", "again", false}}, nil},
		{"a repaint over the same rows is one", 24,
			"\x1b[5;1HTo:net: status\r\nok\r\n\r\n\x1b[5;1HTo:net: status\r\nok\r\n\r\n", []Block{{"net", "status\nok", false}}, nil},
		{"a repaint on the alternate screen is one", 24,
			"\x1b[?1049h\x1b[HTo:net: pane\r\n\r\n\x1b[HTo:net: pane\r\n\r\n\x1b[?1049l", []Block{{"net", "pane", false}}, nil},
		{"a changed repaint is a new message", 24,
			"\x1b[5;1HTo:net: 10%\r\n\r\n\x1b[5;1HTo:net: 90%\r\n\r\n", []Block{{"net", "10%", false}, {"net", "90%", false}}, nil},
		{"broken UTF-8 is not sent", 24, "To:net: caf\xc3 ok\r\n\r\n", nil,
			[]string{"tamq: not sent to net: the block has bytes that are not valid UTF-8"}},
		{"a lone continuation byte in a later line", 24, "To:net: fine\r\nbad \x80 byte\r\n\r\n", nil,
			[]string{"tamq: not sent to net: the block has bytes that are not valid UTF-8"}},
		{"an overlong form", 24, "To:net: \xe0\x80\xaf\r\n\r\n", nil,
			[]string{"tamq: not sent to net: the block has bytes that are not valid UTF-8"}},
		{"a replacement character the agent printed is text", 24, "To:net: \xef\xbf\xbd é\r\n\r\n", []Block{{"net", "\ufffd é", false}}, nil},
		{"broken bytes outside a block do not matter", 24, "\xff\xfe\r\nTo:net: clean\r\n\r\n", []Block{{"net", "clean", false}}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, bytewise := range []bool{false, true} {
				o, rec := newObserver()
				o.SetRows(tt.rows)
				feedObserver(o, tt.out, bytewise)
				if !reflect.DeepEqual(rec.blocks, tt.want) {
					t.Errorf("bytewise=%v: blocks %+v, want %+v", bytewise, rec.blocks, tt.want)
				}
				if !reflect.DeepEqual(rec.notices, tt.notices) {
					t.Errorf("bytewise=%v: notices %q, want %q", bytewise, rec.notices, tt.notices)
				}
			}
		})
	}
}

// A quiet spell closes the block, leaving out the prompt that follows it;
// the clock is the test's.
func TestQuietClosesTheBlock(t *testing.T) {
	o, rec := newObserver()
	o.Quiet = 3 * time.Second
	o.Write([]byte("To:net: tests pass\r\nall of them\r\n$ "))
	due, ok := o.QuietDue()
	if !ok || !due.Equal(rec.now.Add(3*time.Second)) {
		t.Fatalf("QuietDue = %v, %v", due, ok)
	}
	rec.now = rec.now.Add(2999 * time.Millisecond)
	o.Tick()
	if len(rec.blocks) != 0 {
		t.Fatalf("closed before the quiet period: %+v", rec.blocks)
	}
	rec.now = rec.now.Add(time.Millisecond)
	o.Tick()
	if want := []Block{{"net", "tests pass\nall of them", false}}; !reflect.DeepEqual(rec.blocks, want) {
		t.Fatalf("blocks %+v, want %+v", rec.blocks, want)
	}
	if _, ok := o.QuietDue(); ok {
		t.Error("a quiet deadline with no block open")
	}
	// The command typed at the prompt and its output stay out.
	o.Write([]byte("ls\r\nREADME\r\n"))
	o.Close()
	if len(rec.blocks) != 1 {
		t.Fatalf("later output became a block: %+v", rec.blocks)
	}
	// Output keeps a block open: each write moves the deadline.
	o.Write([]byte("To:net: streaming\r\n"))
	rec.now = rec.now.Add(2 * time.Second)
	o.Write([]byte("more\r\n"))
	rec.now = rec.now.Add(2 * time.Second)
	o.Tick()
	if len(rec.blocks) != 1 {
		t.Fatalf("closed while output still came: %+v", rec.blocks)
	}
	rec.now = rec.now.Add(time.Second)
	o.Tick()
	if len(rec.blocks) != 2 || !strings.HasSuffix(rec.blocks[1].Body, "more") {
		t.Fatalf("blocks %+v", rec.blocks)
	}
}
