package service_test

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// TestBodiesThatAreNotUTF8TextAreRefused sends raw bytes that are not UTF-8
// and lone carriage returns, as an argument and on standard input: each is
// refused with body_invalid (exit 11) and nothing is stored, where the JSON
// encoding of the request used to turn the bytes into U+FFFD.
func TestBodiesThatAreNotUTF8TextAreRefused(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	cases := []struct {
		name, text, stderr string
		stdin              bool
	}{
		{"latin-1 argument", "To:net-kingdom: caf\xe9", "not valid UTF-8 (invalid byte at offset 19)", false},
		{"latin-1 on stdin", "To:net-kingdom: caf\xe9\n", "not valid UTF-8 (invalid byte at offset 19)", true},
		{"cut sequence on stdin", "To:net-kingdom: \xe2\x9c", "not valid UTF-8 (invalid byte at offset 16)", true},
		{"lone CR argument", "To:net-kingdom: over\rwritten", "carriage return (0x0d)", false},
		{"lone CR on stdin", "To:net-kingdom: over\rwritten\n", "carriage return (0x0d)", true},
	}
	for _, c := range cases {
		args := []string{"send", c.text}
		if c.stdin {
			args = []string{"send", "-"}
		}
		cmd := e.Command(context.Background(), "tamq", args...)
		cmd.Stdin = strings.NewReader(c.text)
		r := testutil.RunCmd(t, cmd)
		if r.Status != 11 || !strings.Contains(r.Stderr, c.stderr) || r.Stdout != "" {
			t.Errorf("%s: %s", c.name, r)
		}
		if strings.Contains(r.Stderr, "caf") || strings.Contains(r.Stderr, "written") {
			t.Errorf("%s: the error quotes the text: %s", c.name, r.Stderr)
		}
	}
	if ms := history(t, e); len(ms) != 0 {
		t.Errorf("refused messages were stored: %+v", ms)
	}

	// A CRLF line end, as a Windows editor leaves it, is still a line end.
	cmd := e.Command(context.Background(), "tamq", "send", "--json", "-")
	cmd.Stdin = strings.NewReader("To:net-kingdom: first\r\nsecond\r\n")
	r := testutil.RunCmd(t, cmd)
	var m api.Message
	if err := json.Unmarshal([]byte(r.Stdout), &m); err != nil || r.Status != 0 {
		t.Fatalf("CRLF on stdin: %s", r)
	}
	if got := history(t, e, "--body"); len(got) != 1 || *got[0].Body != "first\nsecond" {
		t.Errorf("CRLF message stored as %+v", got)
	}
}

// TestReplayRefusesLinesThatAreNotUTF8 replays a file with a line whose raw
// bytes are not UTF-8: it is rejected by number, before decoding (which would
// replay a body with U+FFFD in it), and the other lines land.
func TestReplayRefusesLinesThatAreNotUTF8(t *testing.T) {
	t.Parallel()
	e, _ := workspace(t, fastConfig, "net-kingdom")
	line := func(id, body string) string {
		return `{"v":1,"id":"` + id + `","batch_id":"` + id + `","sender":"net-kingdom","sender_kind":"worker",` +
			`"target":"net-kingdom","body":"` + body + `","ack_mode":"injected","state":"injected"}`
	}
	lines := []string{
		line("00000000-0000-7000-8000-000000000001", "first"),
		line("00000000-0000-7000-8000-000000000002", "caf\xe9 au lait"),
		line("00000000-0000-7000-8000-000000000003", "third"),
	}
	file := filepath.Join(t.TempDir(), "latin1.jsonl")
	if err := os.WriteFile(file, []byte(strings.Join(lines, "\n")+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	run, r := replay(t, e, file, "--endpoint", endpointOf(t, e))
	if run.Summary != (api.ReplaySummary{Lines: 3, Accepted: 2, Rejected: 1}) || len(run.Rejections) != 1 || r.Status != 11 {
		t.Fatalf("replay: %+v\n%s", run, r)
	}
	if o := run.Rejections[0]; o.Line != 2 || o.Code != "body_invalid" || !strings.Contains(o.Reason, "not valid UTF-8") ||
		strings.Contains(o.Reason, "lait") {
		t.Errorf("rejection %+v", o)
	}
	var bodies []string
	for _, m := range history(t, e, "--body") {
		bodies = append(bodies, *m.Body)
	}
	if strings.Join(bodies, "|") != "third|first" {
		t.Errorf("landed %q", bodies)
	}
}
