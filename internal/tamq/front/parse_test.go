package front

import (
	"strings"
	"testing"
)

// The front runs a command line itself only when pflag would read it the
// same way; everything else must go to tamq-full.
func TestParse(t *testing.T) {
	for _, c := range []struct {
		args string
		want commandLine
		ok   bool
	}{
		{"ping", commandLine{command: "ping"}, true},
		{"--json ping", commandLine{command: "ping", json: true}, true},
		{"ping -q", commandLine{command: "ping", quiet: true}, true},
		{"-v ping --verbose", commandLine{command: "ping", verbose: true}, true},
		{"send To:a:_hi", commandLine{command: "send", text: "To:a: hi"}, true},
		{"send -", commandLine{command: "send", text: "-"}, true},
		{"--quiet send --endpoint tmux-amq-1 To:a:_hi", commandLine{command: "send", text: "To:a: hi", quiet: true, send: SendOptions{Endpoint: "tmux-amq-1"}}, true},
		{"send To:a:_hi --ack-mode=acknowledged --ack-mode injected", commandLine{command: "send", text: "To:a: hi", send: SendOptions{AckMode: "injected"}}, true},
		{"send --endpoint= To:a:_x", commandLine{command: "send", text: "To:a: x"}, true},

		{"", commandLine{}, false},
		{"--json", commandLine{}, false},
		{"status", commandLine{}, false},
		{"ping extra", commandLine{}, false},
		{"ping --endpoint x", commandLine{}, false},
		{"send", commandLine{}, false},
		{"send a b", commandLine{}, false},
		{"send --help", commandLine{}, false},
		{"send -h To:a:_x", commandLine{}, false},
		{"send -- -x", commandLine{}, false},
		{"send -qv To:a:_x", commandLine{}, false},
		{"send --json=false To:a:_x", commandLine{}, false},
		{"--quiet --verbose ping", commandLine{}, false},
		{"send To:a:_x --endpoint", commandLine{}, false},
		{"send --endpoint --json To:a:_x", commandLine{}, false},
		{"send --bogus To:a:_x", commandLine{}, false},
		{"net-kingdom", commandLine{}, false},
	} {
		var args []string
		for _, f := range strings.Fields(c.args) {
			args = append(args, strings.ReplaceAll(f, "_", " "))
		}
		got, ok := parse(args)
		if ok != c.ok || ok && got != c.want {
			t.Errorf("parse(%q) = %+v, %v; want %+v, %v", c.args, got, ok, c.want, c.ok)
		}
	}
}
