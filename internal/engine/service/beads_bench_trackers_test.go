//go:build trackers

package service

import (
	"context"
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
)

// beadsWorld is gita repos, each with a beads database of the real bd
// (TAMQ_TEST_BD) holding perRepo issues as a team's stand after a while
// (githubWorld's mix): of each ten, one in progress, eight closed, and one
// open that waits for the one in progress (a `blocks` link).
type beadsWorld struct {
	bd, root, home string
	slugs          []string
	paths          map[string]string
	registry       func() (*gita.Registry, error)
	settings       config.Beads
}

func newBeadsWorld(b *testing.B, repos, perRepo int) *beadsWorld {
	b.Helper()
	bd := os.Getenv("TAMQ_TEST_BD")
	if bd == "" {
		b.Fatal("TAMQ_TEST_BD is unset: run `make test-trackers`'s bd (scripts/install-bd prints its path)")
	}
	root := b.TempDir()
	w := &beadsWorld{bd: bd, root: root, home: filepath.Join(root, "home"), paths: map[string]string{}}
	w.settings = config.Beads{Command: bd, NeedsHumanLabels: config.DefaultBeadsNeedsHuman,
		SecretsRequiredLabels: config.DefaultBeadsSecrets, DestructiveLabels: config.DefaultBeadsDestructive}
	if err := os.Mkdir(w.home, 0o700); err != nil {
		b.Fatal(err)
	}
	var rows strings.Builder
	for r := range repos {
		slug := fmt.Sprintf("repo%02d", r)
		w.slugs = append(w.slugs, slug)
		w.paths[slug] = filepath.Join(root, slug)
		fmt.Fprintf(&rows, "%s,%s,,\r\n", w.paths[slug], slug)
	}
	// Each database is made by `bd init` (some 1.8 CPU-seconds) and filled
	// by one `bd import` of its issues: a `bd create` each would cost
	// 0.45 CPU-seconds an issue, over seven minutes for 1,000 on 2 cores.
	// As many at once as there are cores.
	var wg sync.WaitGroup
	slots := make(chan struct{}, runtime.NumCPU())
	failed := make(chan error, repos)
	for _, slug := range w.slugs {
		wg.Go(func() {
			slots <- struct{}{}
			defer func() { <-slots }()
			if err := w.makeDatabase(slug, perRepo); err != nil {
				failed <- err
			}
		})
	}
	wg.Wait()
	close(failed)
	for err := range failed {
		b.Fatal(err)
	}
	dir := filepath.Join(root, "gita")
	if err := os.Mkdir(dir, 0o700); err != nil {
		b.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "repos.csv"), []byte(rows.String()), 0o600); err != nil {
		b.Fatal(err)
	}
	w.registry = gita.NewReader(dir).Load
	return w
}

// makeDatabase makes slug's repo: git, `bd init`, and its issues in one
// `bd import`.
func (w *beadsWorld) makeDatabase(slug string, perRepo int) error {
	path := w.paths[slug]
	if out, err := exec.Command("git", "init", "-q", path).CombinedOutput(); err != nil {
		return fmt.Errorf("git init %s: %v\n%s", path, err, out)
	}
	if _, err := w.bdIn(path, nil, "init", "--quiet", "--prefix", slug, "--non-interactive"); err != nil {
		return err
	}
	var jsonl strings.Builder
	working := ""
	for i := range perRepo {
		is := map[string]any{"id": fmt.Sprintf("%s-t%03d", slug, i), "title": fmt.Sprintf("task %d of %s", i, slug), "priority": 2, "issue_type": "task"}
		switch i % 10 {
		case 0:
			is["status"], working = "in_progress", is["id"].(string)
		case 9:
			is["status"] = "open"
			is["dependencies"] = []map[string]string{{"issue_id": is["id"].(string), "depends_on_id": working, "type": "blocks"}}
		default:
			is["status"], is["close_reason"] = "closed", "done"
		}
		line, _ := json.Marshal(is)
		jsonl.Write(append(line, '\n'))
	}
	_, err := w.bdIn(path, strings.NewReader(jsonl.String()), "import", "-")
	return err
}

// bdIn runs the real bd as a person does in repo, stdin given.
// BD_DISABLE_METRICS: a benchmark sends no usage reports to bd's authors.
func (w *beadsWorld) bdIn(repo string, stdin *strings.Reader, args ...string) ([]byte, error) {
	cmd := exec.Command(w.bd, args...)
	cmd.Dir = repo
	cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + w.home, "BD_NON_INTERACTIVE=1", "BD_DISABLE_METRICS=1",
		"BEADS_DIR=" + filepath.Join(repo, ".beads")}
	if stdin != nil {
		cmd.Stdin = stdin
	}
	out, err := cmd.Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		return nil, fmt.Errorf("bd %v in %s: %v\n%s%s", args, repo, err, out, stderr)
	}
	return out, nil
}

// driver is the beads driver over w as the engine opens it (kinds.Open:
// its poll of the files every second), on clk.
func (w *beadsWorld) driver(b *testing.B, clk clock.Clock) *beads.Driver {
	b.Helper()
	d, err := beads.New(beads.Options{Settings: w.settings, Registry: w.registry, Clock: clk, Home: filepath.Join(w.root, "engine-bd-home")})
	if err != nil {
		b.Fatal(err)
	}
	return d
}

// engine is an engine service (not running its workers) over d, so a
// benchmark takes one look at a time.
func (w *beadsWorld) engine(b *testing.B, d *beads.Driver) *Service {
	b.Helper()
	return inProcessEngineWith(b, func(cfg *config.Loaded) {
		cfg.StateHub.Kind, cfg.StateHub.Beads = config.KindBeads, w.settings
	}, w.registry, d, nil)
}

// cpuWithChildren is the CPU this process and the children it waited for
// (the bd processes) have used. bd's detached usage reporter (`bd
// send-metrics`, which each bd started without BD_DISABLE_METRICS spawns)
// is not waited for, and not in it.
func cpuWithChildren() time.Duration {
	var self, kids syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &self)
	syscall.Getrusage(syscall.RUSAGE_CHILDREN, &kids)
	return time.Duration(self.Utime.Nano() + self.Stime.Nano() + kids.Utime.Nano() + kids.Stime.Nano())
}

// stepClock is the system's time, but the After of the driver's poll of
// the files fires only when step says: the polls run one at a time, each
// waited for.
type stepClock struct {
	fire    chan time.Time
	waiting chan struct{}
}

func newStepClock() *stepClock {
	return &stepClock{fire: make(chan time.Time), waiting: make(chan struct{})}
}

func (c *stepClock) Now() time.Time { return clock.System.Now() }

func (c *stepClock) After(time.Duration) <-chan time.Time {
	c.waiting <- struct{}{}
	return c.fire
}

// step lets one poll run and waits until it has (Events asks for its
// next After).
func (c *stepClock) step() {
	c.fire <- time.Now()
	<-c.waiting
}

// pollTicks is the system's clock that ticks at each of the driver's
// polls of the files (each ends asking for one After).
type pollTicks struct{ ticks chan struct{} }

func (c *pollTicks) Now() time.Time { return clock.System.Now() }

func (c *pollTicks) After(d time.Duration) <-chan time.Time {
	select {
	case c.ticks <- struct{}{}:
	default: // one pending is enough to tell a poll ended
	}
	return clock.System.After(d)
}

// polled waits until a poll that began after the call has ended: the
// first tick may be of a poll already under way, the second is not.
func (c *pollTicks) polled(b *testing.B) {
	b.Helper()
	select {
	case <-c.ticks:
	default:
	}
	for range 2 {
		select {
		case <-c.ticks:
		case <-time.After(30 * time.Second):
			b.Fatal("the driver stopped polling the files")
		}
	}
}

// BenchmarkBeadsIdle is the cost of beads as State Hub while nothing
// changes, 5 repos of 200 issues each (beadsWorld), at the default poll
// interval (statehub_poll_interval_seconds, 15 s) and the driver's poll of
// the databases' files (every second). "forced" is the baseline, measured
// in the same run: a look that reads every database (a driver that holds
// nothing, as one without the files' stamps would do at every look: one
// `bd list` per repo). "idle" is an interval of the engine's idle steady
// state: one whole look (the observer and the judge) and the interval's
// polls of the files; it must start no bd. Both report bd processes and
// CPU (the bd processes' included) per hour; idle also its ratio to
// forced. "close-to-wake" is the time from a person's `bd close A` (A in
// repo00; B in repo01 waits for it) to the engine's look that finds B
// ready, which is the look that wakes it, through the change hint (the
// poll of the files), not the interval; one round per op, and p50 and
// max over the op's rounds: run with -benchtime 5x for five.
func BenchmarkBeadsIdle(b *testing.B) {
	const repos, perRepo = 5, 200
	w := newBeadsWorld(b, repos, perRepo)
	ctx := context.Background()
	interval := time.Duration(config.Default().Coordination.StateHubPollIntervalSeconds) * time.Second
	const pollEvery = time.Second // beads.Options' default, which kinds.Open keeps
	intervalsPerHour := float64(time.Hour / interval)
	pollsPerInterval := int(interval / pollEvery)
	var forcedPerHour float64 // CPU-ms an hour of forced looks costs, once measured
	rounds := 0               // close-to-wake's pairs made, across the framework's calls

	b.Run("forced", func(b *testing.B) {
		var runs int64
		var cpu time.Duration
		for range b.N {
			d := w.driver(b, nil)
			before := cpuWithChildren()
			board, err := d.Board(ctx)
			cpu += cpuWithChildren() - before
			if err != nil || len(board.Workplans) != repos {
				b.Fatalf("%d workplans, %v", len(board.Workplans), err)
			}
			for _, wp := range board.Workplans {
				if len(wp.Tasks) != perRepo {
					b.Fatalf("%s has %d tasks", wp.ID, len(wp.Tasks))
				}
			}
			runs += d.Runs()
		}
		perLook := cpu / time.Duration(b.N)
		forcedPerHour = float64(perLook.Microseconds()) / 1000 * intervalsPerHour
		b.ReportMetric(float64(runs)/float64(b.N), "bd-runs/look")
		b.ReportMetric(float64(perLook.Microseconds())/1000, "cpu-ms/look")
		b.ReportMetric(float64(runs)/float64(b.N)*intervalsPerHour, "bd-runs/hour")
		b.ReportMetric(forcedPerHour, "cpu-ms/hour")
	})

	b.Run("idle", func(b *testing.B) {
		clk := newStepClock()
		d := w.driver(b, clk)
		s := w.engine(b, d)
		if err := s.observer.observeOnce(ctx); err != nil {
			b.Fatal(err)
		}
		if obs, _, _, _ := s.observer.view.snapshot(); len(obs.Tasks) != repos*perRepo {
			b.Fatalf("%d tasks observed", len(obs.Tasks))
		}
		hctx, stop := context.WithCancel(ctx)
		var hints atomic.Int64
		done := make(chan error, 1)
		go func() { done <- d.Events(hctx, func() {}, func() { hints.Add(1) }) }()
		<-clk.waiting // its first poll done, waiting for the next
		runs := d.Runs()
		var lookCPU, pollCPU time.Duration
		b.ResetTimer()
		for range b.N {
			before := cpuWithChildren()
			if err := s.observer.observeOnce(ctx); err != nil {
				b.Fatal(err)
			}
			mid := cpuWithChildren()
			for range pollsPerInterval {
				clk.step()
			}
			lookCPU, pollCPU = lookCPU+mid-before, pollCPU+cpuWithChildren()-mid
		}
		b.StopTimer()
		stop() // Events waits in its select (step saw it ask for its next After): it returns
		if err := <-done; err != nil {
			b.Fatal(err)
		}
		runs = d.Runs() - runs
		if runs != 0 || hints.Load() != 0 {
			b.Fatalf("nothing changed, yet the looks started %d bd processes and the files hinted %d changes", runs, hints.Load())
		}
		perInterval := (lookCPU + pollCPU) / time.Duration(b.N)
		perHour := float64(perInterval.Microseconds()) / 1000 * intervalsPerHour
		b.ReportMetric(float64(runs)/float64(b.N)*intervalsPerHour, "bd-runs/hour")
		b.ReportMetric(perHour, "cpu-ms/hour")
		b.ReportMetric(float64((lookCPU/time.Duration(b.N)).Microseconds())/1000, "look-cpu-ms")
		b.ReportMetric(float64((pollCPU / time.Duration(b.N*pollsPerInterval)).Microseconds()), "file-poll-cpu-us")
		if forcedPerHour > 0 {
			b.ReportMetric(perHour/forcedPerHour, "cpu-vs-forced")
		}
	})

	b.Run("close-to-wake", func(b *testing.B) {
		clk := &pollTicks{ticks: make(chan struct{}, 1)}
		d := w.driver(b, clk)
		s := w.engine(b, d)
		if err := s.observer.observeOnce(ctx); err != nil {
			b.Fatal(err)
		}
		hctx, stop := context.WithCancel(ctx)
		defer stop()
		hinted := make(chan struct{}, 1)
		go d.Events(hctx, func() {}, func() {
			select {
			case hinted <- struct{}{}:
			default: // one pending is enough, as the observer's kick
			}
		})
		alpha, beta := w.slugs[0], w.slugs[1]
		var wakes, closes []time.Duration
		var failedLooks int
		b.ResetTimer()
		for range b.N {
			b.StopTimer()
			// A fresh pair each round.
			tag := fmt.Sprintf("w%03d", rounds)
			rounds++
			aID, bID := alpha+"-"+tag, beta+"-"+tag
			if _, err := w.bdIn(w.paths[alpha], strings.NewReader(fmt.Sprintf(`{"id":%q,"title":"A %s","status":"open","priority":1}`+"\n", aID, tag)), "import", "-"); err != nil {
				b.Fatal(err)
			}
			if _, err := w.bdIn(w.paths[beta], strings.NewReader(fmt.Sprintf(`{"id":%q,"title":"B %s","status":"open","priority":1,"dependencies":[{"issue_id":%q,"depends_on_id":"external:%s:%s","type":"blocks"}]}`+"\n",
				bID, tag, bID, alpha, aID)), "import", "-"); err != nil {
				b.Fatal(err)
			}
			// The hints of the pair's making are spent before the close: a
			// whole poll of the files after them, then one look.
			clk.polled(b)
			select {
			case <-hinted:
			default:
			}
			if err := s.observer.observeOnce(ctx); err != nil {
				b.Fatal(err)
			}
			idA, idB := beads.TaskID(alpha, aID), beads.TaskID(beta, bID)
			if tv, ok := s.observer.view.task(idB); !ok || tv.Actionable || len(tv.Deps) != 1 || tv.Deps[0].ID != idA {
				b.Fatalf("B does not wait for A: %+v", tv)
			}
			// The close comes at a random point of the poll's second, as a
			// person's would: right after the setup's look it would come
			// at the same point every round, and measure that point only.
			time.Sleep(rand.N(pollEvery))
			b.StartTimer()
			start := time.Now()
			if _, err := w.bdIn(w.paths[alpha], nil, "close", aID, "--reason", "done by a person"); err != nil {
				b.Fatal(err)
			}
			closes = append(closes, time.Since(start))
			deadline := time.After(30 * time.Second)
			var retry <-chan time.Time
			for {
				select {
				case <-hinted:
				case <-retry:
				case <-deadline:
					b.Fatalf("B not ready 30 s after A's close")
				}
				// A look that fails (bd's lock of the database taken) is
				// tried again as the observer does: a second later (its
				// backoff), or at the next hint.
				retry = nil
				if err := s.observer.observeOnce(ctx); err != nil {
					failedLooks++
					retry = time.After(time.Second)
					continue
				}
				if tv, _ := s.observer.view.task(idB); tv.Actionable {
					break
				}
			}
			wakes = append(wakes, time.Since(start))
		}
		b.StopTimer()
		slices.Sort(wakes)
		slices.Sort(closes)
		ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
		b.ReportMetric(ms(wakes[len(wakes)/2]), "close-to-wake-ms")
		b.ReportMetric(ms(wakes[len(wakes)-1]), "close-to-wake-max-ms")
		b.ReportMetric(ms(closes[len(closes)/2]), "bd-close-ms")
		b.ReportMetric(float64(failedLooks), "failed-looks")
	})
}
