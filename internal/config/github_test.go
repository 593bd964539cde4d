package config

import (
	"reflect"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// A config that names no kind is the contract's, with the version and
// `config show` it had before kinds existed; naming the contract changes
// neither.
func TestStateHubKindDefaultsToTheContract(t *testing.T) {
	for _, program := range []paths.Program{paths.Tamq, paths.Engine} {
		def, err := Load(setupFor(t, program, nil, nil))
		if err != nil {
			t.Fatal(err)
		}
		if def.StateHub.HubKind() != KindContract || def.StateHub.Kind != KindContract {
			t.Errorf("%s: kind %q", program, def.StateHub.Kind)
		}
		named := "[statehub]\nkind = \"contract\"\n"
		l, err := Load(setupFor(t, program, &named, nil))
		if err != nil {
			t.Fatal(err)
		}
		if l.Version != def.Version {
			t.Errorf("%s: naming the default kind changed the version: %s, want %s", program, l.Version, def.Version)
		}
		out, err := def.TOML(program)
		if err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(out), "[statehub.github]") {
			t.Errorf("%s: config show prints an unused [statehub.github]:\n%s", program, out)
		}
	}
}

// kind = "github" takes GitHub's API root and the default labels, which
// config show prints and Parse takes back.
func TestGitHubDefaults(t *testing.T) {
	content := "[statehub]\nkind = \"github\"\ncredential_command = [\"gh\", \"auth\", \"token\"]\n"
	l, err := Load(setupFor(t, paths.Engine, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	want := GitHub{Label: "agent", InProgressLabel: "in-progress", BlockedLabel: "blocked", NeedsHumanLabel: "needs-human",
		SecretsRequiredLabel: "secrets-required", DestructiveLabel: "destructive"}
	if l.StateHub.APIBase != DefaultGitHubAPIBase || !reflect.DeepEqual(l.StateHub.GitHub, want) {
		t.Errorf("api_base %s, github %+v", l.StateHub.APIBase, l.StateHub.GitHub)
	}
	out, err := l.TOML(paths.Engine)
	if err != nil {
		t.Fatal(err)
	}
	back, err := Parse(paths.Engine, "show.toml", out)
	if err != nil || back.Version(paths.Engine) != l.Version {
		t.Errorf("config show does not parse back to the same config (%v):\n%s", err, out)
	}
	def, _ := Load(setupFor(t, paths.Engine, nil, nil))
	if l.Version == def.Version {
		t.Error("kind github kept the default version")
	}
	// STATEHUB_API_BASE still points the engine elsewhere (a GitHub
	// Enterprise Server, or a double in tests).
	l2, err := Load(setupFor(t, paths.Engine, &content, map[string]string{"STATEHUB_API_BASE": "http://127.0.0.1:4567/api/v3"}))
	if err != nil || l2.StateHub.APIBase != "http://127.0.0.1:4567/api/v3" {
		t.Errorf("override: %v %v", l2, err)
	}
	// tamq reads the kind, and refuses the engine's section.
	tamqOwn := "[statehub]\nkind = \"github\"\n"
	lt, err := Load(setupFor(t, paths.Tamq, &tamqOwn, nil))
	if err != nil || lt.StateHub.HubKind() != KindGitHub || !lt.StateHub.GitHub.IsZero() {
		t.Errorf("tamq: %+v %v", lt, err)
	}
	engineOnly := "[statehub]\nkind = \"github\"\n[statehub.github]\nlabel = \"bot\"\n"
	if _, err := Load(setupFor(t, paths.Tamq, &engineOnly, nil)); !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "coordination-engine's") {
		t.Errorf("tamq took the engine's [statehub.github]: %v", err)
	}
}

func TestGitHubValues(t *testing.T) {
	content := `[statehub]
kind = "github"
api_base = "https://ghe.example.com/api/v3"
[statehub.github]
label = "bot-task"
blocked_label = "stuck"
repos = { alpha = "octo-org/alpha", "beta two" = "octo-org/beta.go" }
comment_on = ["trigger.stopped", "lease.stopped"]
`
	l, err := Load(setupFor(t, paths.Engine, &content, nil))
	if err != nil {
		t.Fatal(err)
	}
	g := l.StateHub.GitHub
	if g.Label != "bot-task" || g.BlockedLabel != "stuck" || g.InProgressLabel != "in-progress" ||
		g.Repos["beta two"] != "octo-org/beta.go" || len(g.CommentOn) != 2 {
		t.Errorf("github %+v", g)
	}
}

func TestGitHubValidation(t *testing.T) {
	cases := map[string]struct{ content, key string }{
		"unknown kind":         {"[statehub]\nkind = \"jira\"\n", "statehub.kind"},
		"section without kind": {"[statehub.github]\nlabel = \"x\"\n", "statehub.github"},
		"http to another host": {"[statehub]\nkind = \"github\"\napi_base = \"http://ghe.example.com/api/v3\"\n", "statehub.api_base"},
		"a unix socket":        {"[statehub]\nkind = \"github\"\napi_base = \"unix:///run/gh.sock\"\n", "statehub.api_base"},
		"a comma in a label":   {"[statehub]\nkind = \"github\"\n[statehub.github]\nlabel = \"a,b\"\n", "statehub.github.label"},
		"a long label":         {"[statehub]\nkind = \"github\"\n[statehub.github]\nlabel = \"" + strings.Repeat("l", 51) + "\"\n", "statehub.github.label"},
		"two keys, one label":  {"[statehub]\nkind = \"github\"\n[statehub.github]\nblocked_label = \"Agent\"\n", "statehub.github.blocked_label"},
		"a control character":  {"[statehub]\nkind = \"github\"\n[statehub.github]\nlabel = \"a\\u001b[31m\"\n", "statehub.github.label"},
		"not owner/name":       {"[statehub]\nkind = \"github\"\n[statehub.github]\nrepos = { a = \"alpha\" }\n", "statehub.github.repos"},
		"a bad owner":          {"[statehub]\nkind = \"github\"\n[statehub.github]\nrepos = { a = \"-x/alpha\" }\n", "statehub.github.repos"},
		"a path":               {"[statehub]\nkind = \"github\"\n[statehub.github]\nrepos = { a = \"o/../../x\" }\n", "statehub.github.repos"},
		"an unknown receipt":   {"[statehub]\nkind = \"github\"\n[statehub.github]\ncomment_on = [\"wake.sent\"]\n", "statehub.github.comment_on"},
	}
	for name, c := range cases {
		t.Run(name, func(t *testing.T) {
			content := c.content
			_, err := Load(setupFor(t, paths.Engine, &content, nil))
			if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), c.key) {
				t.Errorf("%q: %v, want a config error naming %s", content, err, c.key)
			}
		})
	}
	// A token in the URL is refused (validateAPIBase, for every kind), and
	// the refusal does not repeat it.
	for _, base := range []string{"https://x:secret@ghe.example.com/api/v3", "https://secret@api.github.com", "https://api.github.com/?access_token=secret"} {
		content := "[statehub]\nkind = \"github\"\napi_base = \"" + base + "\"\n"
		_, err := Load(setupFor(t, paths.Engine, &content, nil))
		if !errs.Is(err, errs.ConfigInvalid) || !strings.Contains(err.Error(), "statehub.api_base") || strings.Contains(err.Error(), "secret") {
			t.Errorf("%s: %v, want a config error naming statehub.api_base without the secret", base, err)
		}
	}
	// http on loopback is for tests, and allowed.
	ok := "[statehub]\nkind = \"github\"\napi_base = \"http://127.0.0.1:9/api/v3\"\n"
	if _, err := Load(setupFor(t, paths.Engine, &ok, nil)); err != nil {
		t.Errorf("loopback http: %v", err)
	}
}

func TestParseGitHubRepo(t *testing.T) {
	for in, want := range map[string][2]string{"octo/hello-world": {"octo", "hello-world"}, "a-b/c.d_e": {"a-b", "c.d_e"}} {
		o, n, err := ParseGitHubRepo(in)
		if err != nil || o != want[0] || n != want[1] {
			t.Errorf("%q: %q %q %v", in, o, n, err)
		}
	}
	for _, in := range []string{"", "o", "o/", "/n", "o/n/x", "o--p/n", "o/..", "o/n n", "ö/n", strings.Repeat("o", 40) + "/n"} {
		if _, _, err := ParseGitHubRepo(in); err == nil {
			t.Errorf("%q accepted", in)
		}
	}
}
