package config

import (
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// Without [notify] nothing is run and the version is what it was before
// the section existed; with it, the argv is kept as written and the
// timeout defaults to 10 seconds.
func TestNotifyOffByDefaultAndValues(t *testing.T) {
	def, err := Load(setupFor(t, paths.Engine, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	if def.Notify.On() || !def.Notify.IsZero() {
		t.Errorf("notify on by default: %+v", def.Notify)
	}
	if out, _ := def.TOML(paths.Engine); strings.Contains(string(out), "notify") {
		t.Errorf("config show prints an unset [notify]:\n%s", out)
	}
	on := "[notify]\ncommand = [\"/bin/sh\", \"/etc/tamq/notify.sh\"]\n"
	l, err := Load(setupFor(t, paths.Engine, &on, nil))
	if err != nil {
		t.Fatal(err)
	}
	if !l.Notify.On() || !reflect.DeepEqual(l.Notify.Command, []string{"/bin/sh", "/etc/tamq/notify.sh"}) || l.Notify.Timeout() != 10*time.Second {
		t.Errorf("notify %+v timeout %v", l.Notify, l.Notify.Timeout())
	}
	if l.Version == def.Version {
		t.Error("setting [notify] kept the config version")
	}
	on += "timeout_seconds = 3\n"
	if l, err = Load(setupFor(t, paths.Engine, &on, nil)); err != nil || l.Notify.Timeout() != 3*time.Second {
		t.Errorf("timeout: %v %v", l.Notify, err)
	}
	// A program name is looked up on PATH.
	byName := "[notify]\ncommand = [\"sh\", \"-c\", \"true\"]\n"
	if _, err := Load(setupFor(t, paths.Engine, &byName, nil)); err != nil {
		t.Errorf("a program on PATH: %v", err)
	}
}

func TestNotifyValidation(t *testing.T) {
	tests := []struct{ name, content, want string }{
		{"empty argv", "command = []\n", "notify.command: is empty"},
		{"empty program", "command = [\"\", \"x\"]\n", "notify.command: the program name (first element) is empty"},
		{"not on PATH", "command = [\"no-such-notifier-x9\"]\n", `notify.command: "no-such-notifier-x9" is not found on PATH; write its absolute path`},
		{"relative path", "command = [\"bin/notify\"]\n", `notify.command: "bin/notify" must be an absolute path or a program name found on PATH`},
		{"absolute missing", "command = [\"/nonexistent/notify\"]\n", `notify.command: "/nonexistent/notify" is not an executable file`},
		{"timeout high", "command = [\"/bin/sh\"]\ntimeout_seconds = 301\n", "notify.timeout_seconds: 301 is out of range 1..300"},
		{"timeout negative", "command = [\"/bin/sh\"]\ntimeout_seconds = -1\n", "notify.timeout_seconds: -1"},
		{"unknown key", "command = [\"/bin/sh\"]\nshell = true\n", "unknown key 'notify.shell'"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			content := "[notify]\n" + tt.content
			p := setupFor(t, paths.Engine, &content, nil)
			_, err := Load(p)
			if !errs.Is(err, errs.ConfigInvalid) {
				t.Fatalf("err = %v, want config_invalid", err)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.want) || strings.Contains(msg, "\n") {
				t.Errorf("error %q, want one line with %q", msg, tt.want)
			}
		})
	}
}

// [notify] is the engine's: tamq refuses it as the other program's key.
func TestTamqRefusesNotify(t *testing.T) {
	content := "[notify]\ncommand = [\"/bin/sh\"]\n"
	_, err := Load(setupFor(t, paths.Tamq, &content, nil))
	if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "coordination-engine's") {
		t.Errorf("err %v", err)
	}
}
