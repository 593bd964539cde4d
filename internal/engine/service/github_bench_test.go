package service

import (
	"context"
	"fmt"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/testutil/githubdouble"
)

// githubWorld is GitHub (the double) with repos repositories of perRepo
// labelled issues each, and gita repos whose origins name them. The issues
// stand as a team's do after a while (the poll-cycle benchmark's mix):
// of each ten, one in progress, eight closed as completed, and one waiting
// for the one in progress (blocked by it).
type githubWorld struct {
	gh       *githubdouble.Server
	registry func() (*gita.Registry, error)
	token    string
	repos    []string
}

func newGitHubWorld(b testing.TB, repos, perRepo int) *githubWorld {
	b.Helper()
	// A budget no benchmark run spends: the first looks count.
	w := &githubWorld{gh: githubdouble.Start(b, githubdouble.Options{RateLimit: 1 << 30})}
	root := b.TempDir()
	var rows strings.Builder
	for r := range repos {
		name := fmt.Sprintf("repo%02d", r)
		full := "octo-org/" + name
		w.repos = append(w.repos, name)
		w.gh.AddRepo(full, githubdouble.RepoOptions{})
		var working int
		for i := range perRepo {
			labels := []string{"agent"}
			if i%10 == 0 {
				labels = append(labels, "in-progress")
			}
			is := w.gh.CreateIssue(full, githubdouble.IssueInput{Title: fmt.Sprintf("task %d of %s", i, name), Labels: labels})
			switch i % 10 {
			case 0:
				working = is.Number
			case 9:
				w.gh.AddBlockedBy(full, is.Number, githubdouble.IssueRef{Repo: full, Number: working})
			default:
				w.gh.Close(full, is.Number, "completed")
			}
		}
		path := filepath.Join(root, name)
		for _, args := range [][]string{{"init", "-q", path}, {"-C", path, "remote", "add", "origin", "git@github.com:" + full + ".git"}} {
			if out, err := exec.Command("git", args...).CombinedOutput(); err != nil {
				b.Fatalf("git %v: %v\n%s", args, err, out)
			}
		}
		fmt.Fprintf(&rows, "%s,%s,,\r\n", path, name)
	}
	dir := filepath.Join(root, "gita")
	os.MkdirAll(dir, 0o700)
	if err := os.WriteFile(filepath.Join(dir, "repos.csv"), []byte(rows.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	w.registry = gita.NewReader(dir).Load
	w.token = filepath.Join(root, "token")
	if err := os.WriteFile(w.token, []byte(w.gh.Token()), 0o600); err != nil {
		b.Fatal(err)
	}
	return w
}

// engine is an engine service (not running its workers) reading w as
// State Hub, so a benchmark can take one look at a time.
func (w *githubWorld) engine(b testing.TB) *Service {
	b.Helper()
	return inProcessEngineWith(b, func(cfg *config.Loaded) {
		cfg.StateHub.Kind, cfg.StateHub.APIBase, cfg.StateHub.CredentialCommand = config.KindGitHub, w.gh.URL(), []string{"cat", w.token}
		cfg.StateHub.GitHub = githubSettings()
	}, w.registry, nil, nil)
}

// githubSettings are [statehub.github]'s defaults.
func githubSettings() config.GitHub {
	return config.GitHub{Label: "agent", InProgressLabel: "in-progress", BlockedLabel: "blocked",
		NeedsHumanLabel: "needs-human", SecretsRequiredLabel: "secrets-required", DestructiveLabel: "destructive"}
}

// counted is the double's requests since the first n: all of them, and
// those GitHub counts against the rate limit.
func (w *githubWorld) counted(n int) (all, charged int) {
	for _, r := range w.gh.Requests()[n:] {
		all++
		if r.CountedAgainstLimit {
			charged++
		}
	}
	return all, charged
}

// BenchmarkGitHubLook is the engine's look at GitHub Issues as State Hub:
// 10 repositories of 100 labelled issues each (1,000 tasks, one in ten
// blocked by another: githubWorld). "first" is a look of a driver that holds nothing
// (the engine's first look after a start): requests, those GitHub counts,
// and time per look. "unchanged" is the steady state, the engine's whole
// look (the observer and the judge) when nothing changed: requests per
// look (the goal: one conditional request per repository, none counted),
// time and CPU per look, and the CPU an hour of looks at the default poll
// interval costs (cpu-s/hour; the in-process double's share included, so
// the engine's own is less). One look in twenty is a refresh look (the
// blockers' lists read again, and the page after a full last one): its
// requests are the most a look makes, the others' the fewest. The baseline of the same run is the same
// 1,000 tasks in 10 workplans of the State Hub contract, unchanged: its
// look is one conditional GET of the workplans.
func BenchmarkGitHubLook(b *testing.B) {
	const repos, perRepo = 10, 100
	w := newGitHubWorld(b, repos, perRepo)
	ctx := context.Background()
	looksPerHour := float64(time.Hour / (time.Duration(config.Default().Coordination.StateHubPollIntervalSeconds) * time.Second))
	b.Run("first", func(b *testing.B) {
		var all, charged int
		for range b.N {
			d, err := github.New(github.Options{APIBase: w.gh.URL(), Credential: []string{"cat", w.token}, Registry: w.registry,
				Settings: githubSettings()})
			if err != nil {
				b.Fatal(err)
			}
			n := len(w.gh.Requests())
			board, err := d.Board(ctx)
			if err != nil || len(board.Workplans) != repos {
				b.Fatalf("%d workplans, %v", len(board.Workplans), err)
			}
			a, c := w.counted(n)
			all, charged = all+a, charged+c
		}
		b.ReportMetric(float64(all)/float64(b.N), "requests/look")
		b.ReportMetric(float64(charged)/float64(b.N), "counted/look")
	})
	b.Run("unchanged", func(b *testing.B) {
		s := w.engine(b)
		if err := s.observer.observeOnce(ctx); err != nil {
			b.Fatal(err)
		}
		if obs, _, _, _ := s.observer.view.snapshot(); len(obs.Tasks) != repos*perRepo {
			b.Fatalf("%d tasks observed", len(obs.Tasks))
		}
		n := len(w.gh.Requests())
		var cpu time.Duration
		plain, refresh := 1<<30, 0 // the fewest requests of a look, the most
		b.ResetTimer()
		for range b.N {
			before, sent := cpuTime(), len(w.gh.Requests())
			if err := s.observer.observeOnce(ctx); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - before
			r, _ := w.counted(sent)
			plain, refresh = min(plain, r), max(refresh, r)
		}
		b.StopTimer()
		all, charged := w.counted(n)
		perLook := cpu / time.Duration(b.N)
		b.ReportMetric(float64(all)/float64(b.N), "requests/look")
		b.ReportMetric(float64(plain), "plain-look-requests")
		b.ReportMetric(float64(refresh), "refresh-look-requests")
		b.ReportMetric(float64(charged)/float64(b.N), "counted/look")
		b.ReportMetric(float64(perLook.Microseconds())/1000, "cpu-ms/look")
		b.ReportMetric(perLook.Seconds()*looksPerHour, "cpu-s/hour")
	})
	b.Run("baseline-contract-unchanged", func(b *testing.B) {
		hub := &bigHub{}
		for r := range repos {
			wp := contract.Workplan{ID: fmt.Sprintf("W%02d", r), Repo: fmt.Sprintf("repo%02d", r), Status: "active", Revision: "1"}
			for i := range perRepo {
				t := contract.Task{ID: fmt.Sprintf("W%02d-T%03d", r, i), Title: "task", Repo: wp.Repo, Revision: "1", Status: "done", Priority: i}
				switch i % 10 {
				case 0:
					t.Status = "in_progress"
				case 9:
					t.Status, t.DependsOn = "todo", []string{fmt.Sprintf("W%02d-T%03d", r, i-9)}
				}
				wp.Tasks = append(wp.Tasks, t)
			}
			hub.workplans = append(hub.workplans, wp)
		}
		hub.publish()
		ts := httptest.NewServer(hub)
		defer ts.Close()
		s := inProcessEngine(b, ts.URL)
		if err := s.observer.observeOnce(ctx); err != nil {
			b.Fatal(err)
		}
		var cpu time.Duration
		b.ResetTimer()
		for range b.N {
			before := cpuTime()
			if err := s.observer.observeOnce(ctx); err != nil {
				b.Fatal(err)
			}
			cpu += cpuTime() - before
		}
		perLook := cpu / time.Duration(b.N)
		b.ReportMetric(float64(perLook.Microseconds())/1000, "cpu-ms/look")
		b.ReportMetric(perLook.Seconds()*looksPerHour, "cpu-s/hour")
	})
}
