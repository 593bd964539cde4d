package github

import (
	"strings"
	"testing"

	gogh "github.com/google/go-github/v89/github"

	"github.com/tmux-amq/tamq/internal/config"
)

var settings = config.GitHub{Label: "agent", InProgressLabel: "in-progress", BlockedLabel: "blocked", NeedsHumanLabel: "needs-human",
	SecretsRequiredLabel: "secrets-required", DestructiveLabel: "destructive"}

func issue(number int, state, reason string, labels ...string) *gogh.Issue {
	is := &gogh.Issue{Number: gogh.Ptr(number), State: gogh.Ptr(state), Title: gogh.Ptr("a title")}
	if reason != "" {
		is.StateReason = gogh.Ptr(reason)
	}
	for _, l := range labels {
		is.Labels = append(is.Labels, &gogh.Label{Name: gogh.Ptr(l)})
	}
	return is
}

func TestStatusOfAnIssue(t *testing.T) {
	cases := []struct {
		is   *gogh.Issue
		want string
	}{
		{issue(1, "open", "", "agent"), "todo"},
		{issue(1, "open", "reopened", "agent"), "todo"},
		{issue(1, "open", "", "agent", "In-Progress"), "in_progress"},
		{issue(1, "open", "", "agent", "blocked", "in-progress"), "blocked"},
		{issue(1, "closed", "completed", "agent", "in-progress"), "done"},
		{issue(1, "closed", "", "agent"), "done"},
		{issue(1, "closed", "not_planned", "agent"), "cancelled"},
		{issue(1, "closed", "duplicate", "agent"), "cancelled"},
	}
	for _, c := range cases {
		if got := status(c.is, settings); got != c.want {
			t.Errorf("%s/%s %v: %s, want %s", c.is.GetState(), c.is.GetStateReason(), labelNames(c.is), got, c.want)
		}
	}
}

// Only an issue a person labelled is a task: not a pull request, not an
// issue without the label (whatever a server answered to the filter).
func TestWhatIsATask(t *testing.T) {
	pr := issue(3, "open", "", "agent")
	pr.PullRequestLinks = &gogh.PullRequestLinks{URL: gogh.Ptr("https://api.github.com/repos/o/r/pulls/3")}
	for _, c := range []struct {
		is   *gogh.Issue
		want bool
	}{
		{issue(1, "open", "", "agent"), true},
		{issue(1, "open", "", "AGENT"), true},
		{issue(1, "open", "", "agents"), false},
		{issue(1, "open", ""), false},
		{pr, false},
		{nil, false},
	} {
		if got := isTask(c.is, "agent"); got != c.want {
			t.Errorf("%+v: task %v", c.is, got)
		}
	}
}

func TestPriorityAndGates(t *testing.T) {
	if p := priority(issue(42, "open", "", "agent")); p != 42 {
		t.Errorf("without a priority label: %d, want the number", p)
	}
	if p := priority(issue(42, "open", "", "agent", "priority:3", "Priority: 1", "priority:x")); p != 1 {
		t.Errorf("with priority labels: %d, want the lowest", p)
	}
	task := task(issue(7, "open", "", "agent", "needs-human", "secrets-required", "destructive"), "o/r", "alpha", []string{"o/r#1"}, settings)
	if !task.NeedsHuman || !task.SecretsRequired || len(task.ProposedActions) != 1 || task.ProposedActions[0].Category != "destructive" {
		t.Errorf("gates %+v", task)
	}
	if task.ID != "o/r#7" || task.Repo != "alpha" || task.DependsOn[0] != "o/r#1" {
		t.Errorf("task %+v", task)
	}
}

// The revision follows what the engine reads: a label, the title, the
// status or a blocker changes it; the body or the order of labels does not.
func TestRevision(t *testing.T) {
	base := issue(7, "open", "", "agent", "bug")
	rev := func(is *gogh.Issue, deps ...string) string { return task(is, "o/r", "alpha", deps, settings).Revision }
	r0 := rev(base)
	reordered := issue(7, "open", "", "bug", "AGENT")
	withBody := issue(7, "open", "", "agent", "bug")
	withBody.Body = gogh.Ptr("a new body")
	for name, same := range map[string]string{"labels reordered": rev(reordered), "body edited": rev(withBody)} {
		if same != r0 {
			t.Errorf("%s changed the revision", name)
		}
	}
	retitled := issue(7, "open", "", "agent", "bug")
	retitled.Title = gogh.Ptr("another")
	for name, other := range map[string]string{
		"a label added": rev(issue(7, "open", "", "agent", "bug", "priority:1")),
		"closed":        rev(issue(7, "closed", "completed", "agent", "bug")),
		"retitled":      rev(retitled),
		"a blocker":     rev(base, "o/r#1"),
	} {
		if other == r0 {
			t.Errorf("%s kept the revision", name)
		}
	}
}

func TestTaskIDs(t *testing.T) {
	if id := TaskID("octo/hello", 12); id != "octo/hello#12" {
		t.Errorf("TaskID %s", id)
	}
	repo, n, err := ParseTaskID("octo/hello#12")
	if err != nil || repo != "octo/hello" || n != 12 {
		t.Errorf("ParseTaskID: %s %d %v", repo, n, err)
	}
	for _, bad := range []string{"", "octo/hello", "octo/hello#", "octo/hello#0", "octo/hello#-1", "octo/hello#012", "octo#1", "../x#1", "T-7", "o/r#1#2"} {
		if _, _, err := ParseTaskID(bad); err == nil {
			t.Errorf("%q parsed", bad)
		}
	}
}

func TestParseRemote(t *testing.T) {
	gh := []string{"github.com"}
	for remote, want := range map[string]string{
		"git@github.com:octo/hello.git":              "octo/hello",
		"git@github.com:octo/hello":                  "octo/hello",
		"git@GitHub.com:octo/hello.git/":             "octo/hello",
		"ssh://git@github.com/octo/hello.git":        "octo/hello",
		"ssh://git@github.com:22/octo/hello.git":     "octo/hello",
		"https://github.com/octo/hello.git":          "octo/hello",
		"https://github.com/octo/hello":              "octo/hello",
		"https://user@github.com/octo/hello.go.git":  "octo/hello.go",
		"git://github.com/octo/hello.git":            "octo/hello",
		"  https://github.com/octo/hello\n":          "octo/hello",
		"git@gitlab.com:octo/hello.git":              "",
		"https://github.com.evil.example/octo/hello": "",
		"https://github.com/octo":                    "",
		"https://github.com/octo/hello/tree/main":    "",
		"/srv/git/hello.git":                         "",
		"../hello":                                   "",
		"file:///github.com/octo/hello":              "",
		"github.com/octo:hello":                      "",
		"":                                           "",
	} {
		if got := ParseRemote(remote, gh); got != want {
			t.Errorf("%q: %q, want %q", remote, got, want)
		}
	}
	// A GitHub Enterprise Server's own host.
	if got := ParseRemote("git@ghe.example.com:team/tool.git", []string{"ghe.example.com"}); got != "team/tool" {
		t.Errorf("enterprise: %q", got)
	}
	if got := ParseRemote("git@github.com:team/tool.git", []string{"ghe.example.com"}); got != "" {
		t.Errorf("github.com remote read for an enterprise API: %q", got)
	}
}

func FuzzParseRemote(f *testing.F) {
	for _, s := range []string{"git@github.com:o/r.git", "https://github.com/o/r", "ssh://git@github.com:22/o/r.git", "x:y", "://"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, remote string) {
		got := ParseRemote(remote, []string{"github.com"})
		if got == "" {
			return
		}
		if _, _, err := config.ParseGitHubRepo(got); err != nil {
			t.Fatalf("%q gave %q, not a repository: %v", remote, got, err)
		}
		if !strings.Contains(strings.ToLower(remote), "github.com") {
			t.Fatalf("%q gave %q without naming github.com", remote, got)
		}
	})
}
