package agentsetup

import (
	"flag"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/rogpeppe/go-internal/txtar"

	"github.com/tmux-amq/tamq/internal/errs"
)

var update = flag.Bool("update", false, "rewrite the golden files' want, warnings and error sections")

// The golden cases are txtar files: "old" is the file before (no section:
// the file does not exist), "projects" the repos to trust (Codex, one a
// line); "want" the file after, "added" and "warnings" what is said about
// it (one a line), "error" the error for a file that is refused; Claude's
// "user" the user's settings read along with a repo's file, and "left_out"
// the hooks left out for them.
func TestGolden(t *testing.T) {
	for _, agent := range []string{"claude", "codex", "gemini-settings", "gemini-trust"} {
		files, _ := filepath.Glob(filepath.Join("testdata", agent, "*.txtar"))
		if len(files) == 0 {
			t.Fatalf("no golden cases for %s", agent)
		}
		for _, file := range files {
			t.Run(agent+"/"+strings.TrimSuffix(filepath.Base(file), ".txtar"), func(t *testing.T) {
				golden(t, agent, file)
			})
		}
	}
}

func golden(t *testing.T, agent, file string) {
	ar, err := txtar.ParseFile(file)
	if err != nil {
		t.Fatal(err)
	}
	sections := map[string]string{}
	for _, f := range ar.Files {
		sections[f.Name] = string(f.Data)
	}
	old := []byte(sections["old"])
	var res Result
	switch agent {
	case "claude":
		res, err = rerun(agent, old, sections)
	default:
		res, err = rerun(agent, old, sections)
	}
	got := map[string]string{}
	if err != nil {
		if !errs.Is(err, errs.ConfigInvalid) {
			t.Errorf("error %v is not config_invalid", err)
		}
		got["error"] = err.Error() + "\n"
	} else {
		got["want"] = string(res.Content)
		got["added"] = joinLines(res.Added)
		got["warnings"] = joinLines(res.Warnings)
		if len(res.LeftOut) > 0 {
			got["left_out"] = joinLines(res.LeftOut)
		}
		if res.Changed != (string(res.Content) != string(old)) {
			t.Errorf("Changed is %v, but the content changed: %v", res.Changed, !res.Changed)
		}
		// Running it again on what it wrote changes nothing, warns the same.
		again, err := rerun(agent, res.Content, sections)
		if err != nil {
			t.Fatalf("second run: %v", err)
		}
		if again.Changed || len(again.Added) > 0 || string(again.Content) != string(res.Content) {
			t.Errorf("second run changed the file again:\n%s", Diff("file", res.Content, again.Content, true))
		}
		if joinLines(again.Warnings) != got["warnings"] {
			t.Errorf("second run warns otherwise:\n%s", joinLines(again.Warnings))
		}
	}
	if *update {
		var files []txtar.File
		for _, f := range ar.Files {
			if f.Name == "old" || f.Name == "projects" || f.Name == "user" {
				files = append(files, f)
			}
		}
		for _, name := range []string{"want", "added", "warnings", "left_out", "error"} {
			if v, ok := got[name]; ok {
				files = append(files, txtar.File{Name: name, Data: []byte(v)})
			}
		}
		ar.Files = files
		if err := os.WriteFile(file, txtar.Format(ar), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	for _, name := range []string{"want", "added", "warnings", "left_out", "error"} {
		if got[name] != sections[name] {
			t.Errorf("%s differs from the golden file (go test -update rewrites it):\n%s", name, Diff(name, []byte(sections[name]), []byte(got[name]), true))
		}
	}
}

func rerun(agent string, content []byte, sections map[string]string) (Result, error) {
	switch agent {
	case "claude":
		// "user" is the user's settings, read along with a repo's file.
		if user, ok := sections["user"]; ok {
			return ClaudeBeside("settings.local.json", content, "user-settings.json", ClaudeUserHooks([]byte(user)))
		}
		return Claude("settings.json", content)
	case "gemini-settings":
		return GeminiSettings("settings.json", content)
	case "gemini-trust":
		return GeminiTrustedFolders("trustedFolders.json", content, lines(sections["projects"]))
	}
	return CodexConfig("config.toml", content, CodexInput{Projects: lines(sections["projects"])})
}

func lines(s string) []string {
	var out []string
	for _, l := range strings.Split(s, "\n") {
		if l != "" {
			out = append(out, l)
		}
	}
	return out
}

func joinLines(list []string) string {
	if len(list) == 0 {
		return ""
	}
	return strings.Join(list, "\n") + "\n"
}
