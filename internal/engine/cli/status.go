package cli

import (
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/standing"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/kinds"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newStatusCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "status",
		Short: "Show the engine's health: process, database, registry, State Hub, tamq, endpoints, leases",
		Long: `Show coordination-engine's health, section by section: the process and its
socket, the SQLite database, the gita registry, State Hub, tamq (the engine's
way into terminals), the tamq endpoints attached, and the leases by state with
the next deadline. When the engine is not running, the sections that need no
engine are still shown. Exit status 0 when healthy; otherwise the status of the
first problem (8 when the engine or tamq does not run or the engine cannot reach
State Hub, 9 when State Hub refuses the credentials, 6 for the database, 4 for
the registry), with the problem on stderr.`,
		Example: `  coordination-engine status
  coordination-engine status --json | jq .leases`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			r, err := client.New(p).Status(cmd.Context())
			if errs.Is(err, errs.Unavailable) {
				cfg, cerr := a.Config()
				if cerr != nil {
					return cerr
				}
				hub, herr := kinds.Open(cfg, a.Registry, nil)
				if herr != nil {
					return herr
				}
				r = service.Collect(cmd.Context(), p, cfg, a.Registry, hub)
			} else if err != nil {
				return err
			}
			problem := service.Judge(&r)
			return a.Report(r, func() { printStatus(a, r) }, problem)
		},
	}
}

func printStatus(a *app.App, r api.StatusReport) {
	health := "healthy"
	if !r.Healthy {
		health = "NOT healthy"
	}
	a.Printf("coordination-engine: %s\n", health)
	s := r.Service
	if s.Running {
		a.Printf("  service:   running (pid %d, up %s, version %s, protocol %s), socket %s\n",
			s.PID, time.Duration(s.UptimeSeconds*float64(time.Second)).Round(time.Second), s.ServerVersion, s.Proto, s.Socket)
		a.Printf("  policy:    %s, config version %s\n", s.PolicyProfile, s.ConfigVersion)
	} else {
		a.Printf("  service:   NOT RUNNING (start it with `coordination-engine start --detach`)\n")
	}
	a.Printf("  sqlite:    %s\n", section(r.SQLite.Error, fmt.Sprintf("%s, schema %d of %d, %d bytes", r.SQLite.Path, r.SQLite.SchemaVersion, r.SQLite.BinarySchemaVersion, r.SQLite.SizeBytes)))
	a.Printf("  registry:  %s\n", section(r.Registry.Error, fmt.Sprintf("%s, %d repos", r.Registry.Path, r.Registry.RepoCount)))
	printStateHub(a, r.StateHub, s.Running)
	if s.Running {
		tamq := "answers"
		if !r.Tamq.Reachable {
			tamq = "does not answer: " + r.Tamq.Error
		}
		a.Printf("  tamq:      %s %s\n", r.Tamq.Socket, tamq)
		a.Printf("  endpoints: %d\n", len(r.Endpoints))
		for _, e := range r.Endpoints {
			repos := make([]string, 0, len(e.Windows))
			for _, w := range e.Windows {
				repos = append(repos, textsafe.Escape(w.Repo)+"("+w.Mode+")")
			}
			a.Printf("    %s  %s  %s  protocol %s  %s\n", e.CoordinationEndpointID, textsafe.Escape(e.TamqEndpointID), e.State, e.Proto, strings.Join(repos, " "))
		}
		var counts []string
		for _, st := range slices.Sorted(maps.Keys(r.Leases.Counts)) {
			counts = append(counts, fmt.Sprintf("%s %d", st, r.Leases.Counts[st]))
		}
		next := ""
		if r.Leases.NextDue != nil {
			next = ", next due " + r.Leases.NextDue.Format(time.RFC3339)
		}
		a.Printf("  leases:    %s\n", section(r.Leases.Error, strings.Join(counts, ", ")+next))
		for _, d := range r.Leases.AtDialog {
			a.Printf("             lease %s waits for a person: dialog in window %s\n", d.LeaseID, d.Dialog)
		}
		printWaiting(a, r.Waiting)
		printTaskCounts(a, r.Tasks)
		printCluster(a, r.Cluster)
	}
}

// printCluster says this host's part in a cluster ([cluster]), if any.
func printCluster(a *app.App, c *api.ClusterStatus) {
	if c == nil {
		return
	}
	state := "etcd answers"
	if c.Error != "" {
		state = "etcd does NOT answer: " + c.Error + " (no new claims; work waits)"
	}
	a.Printf("  cluster:   host %s, etcd %s, %d claims held; %s\n", c.HostID, strings.Join(c.Endpoints, ","), c.Claims, state)
	if c.ReadAt != nil {
		hosts := slices.Sorted(maps.Keys(c.Others))
		others := make([]string, 0, len(hosts))
		for _, h := range hosts {
			others = append(others, fmt.Sprintf("%d by %s", c.Others[h], textsafe.Escape(h)))
		}
		if len(others) == 0 {
			others = append(others, "none")
		}
		a.Printf("             held by other hosts: %s (claims read %s)\n", strings.Join(others, ", "), c.ReadAt.Local().Format(time.TimeOnly))
	}
}

// printTaskCounts says how the observed tasks stand, what needs a person
// first, and where to read which.
func printTaskCounts(a *app.App, c api.TaskCounts) {
	var parts []string
	for _, k := range standing.Kinds {
		if n := c[string(k)]; n > 0 {
			word := strings.ReplaceAll(string(k), "_", " ")
			if k == standing.NeedsYou {
				word = "need you"
			}
			parts = append(parts, fmt.Sprintf("%d %s", n, word))
		}
	}
	switch {
	case len(parts) == 0:
		a.Printf("  tasks:     none observed\n")
	case c[string(standing.NeedsYou)] > 0:
		a.Printf("  tasks:     %s (`coordination-engine tasks --needs-you` says which)\n", strings.Join(parts, ", "))
	default:
		a.Printf("  tasks:     %s\n", strings.Join(parts, ", "))
	}
}

// printWaiting says what work waits, and for what: nothing a person must
// decide, only what the engine waits for before it wakes an agent.
func printWaiting(a *app.App, w api.WaitingStatus) {
	total := 0
	var counts []string
	for _, k := range slices.Sorted(maps.Keys(w.Counts)) {
		total += w.Counts[k]
		counts = append(counts, fmt.Sprintf("%s %d", k, w.Counts[k]))
	}
	if total == 0 && w.Error == "" {
		a.Printf("  waiting:   none\n")
		return
	}
	a.Printf("  waiting:   %s\n", section(w.Error, fmt.Sprintf("%d (%s)", total, strings.Join(counts, ", "))))
	for _, t := range w.Triggers {
		what := t.SourceID
		if t.TaskID != "" {
			what = t.TaskID
		}
		a.Printf("    %s  %s  %s\n", textsafe.Escape(what), textsafe.Escape(t.TargetRepo), textsafe.Escape(t.WaitingFor))
	}
}

func section(err, ok string) string {
	if err != "" {
		return "ERROR: " + err
	}
	return ok
}

// printStateHub says which State Hub the engine reads and how that goes:
// its kind and address, whether it answers, where receipts go; with the
// engine running, the observation, the tracker's request budget, and what
// it watches and what not, and why.
func printStateHub(a *app.App, h api.StateHubStatus, running bool) {
	reach := "reachable"
	if !h.Reachable {
		reach = "not reachable: " + h.Error
		if h.APIBaseFrom != "" {
			reach = "(" + h.APIBaseFrom + ") " + reach
		}
	}
	receipts := fmt.Sprintf("%d receipts not yet published", h.UnpublishedReceipts)
	if h.Receipts == "local" {
		receipts = "receipts kept here (" + h.Kind + " is not a log)"
	}
	a.Printf("  statehub:  %s at %s %s, %s\n", h.Kind, h.APIBase, reach, receipts)
	if !running {
		return
	}
	a.Printf("  observer:  %s\n", observerLine(h))
	if b := h.Budget; b != nil {
		a.Printf("  budget:    %d of %d requests left until %s; %d requests made, %d answered unchanged (free)\n",
			b.Remaining, b.Limit, b.Reset.Local().Format("15:04:05"), h.Requests, h.NotModified)
	}
	if len(h.Watched) > 0 {
		var ws []string
		for _, w := range h.Watched {
			ws = append(ws, fmt.Sprintf("%s (%s)", textsafe.Escape(w.Repo), textsafe.Escape(w.Link)))
		}
		a.Printf("  watched:   %s\n", strings.Join(ws, ", "))
	}
	for _, w := range h.NotWatched {
		a.Printf("  not watched: %s: %s\n", textsafe.Escape(w.Repo), textsafe.Escape(w.Problem))
	}
}

// observerLine says how the observation of State Hub goes: paused on the
// credentials or by State Hub's word, failing, or when it last looked and
// looks next, and how hints arrive.
func observerLine(h api.StateHubStatus) string {
	var parts []string
	switch {
	case h.Paused:
		parts = append(parts, "PAUSED: "+h.PausedWhy()+" (check statehub.credential_command): "+h.ObserveError)
	case h.RetryAt != nil:
		parts = append(parts, fmt.Sprintf("waiting until %s, as State Hub asked: %s", h.RetryAt.Local().Format("15:04:05"), h.ObserveError))
	case h.ObserveError != "":
		parts = append(parts, "failing, backing off: "+h.ObserveError)
	case h.LastPoll == nil:
		parts = append(parts, "no look yet")
	default:
		parts = append(parts, fmt.Sprintf("last look %s (%d looks)", h.LastPoll.Format(time.RFC3339), h.Polls))
	}
	if h.NextLook != nil && h.RetryAt == nil {
		parts = append(parts, "next look "+h.NextLook.Format(time.RFC3339))
	}
	switch {
	case h.EventsConnected:
		parts = append(parts, "event stream connected")
	case !h.EventsOffered:
		parts = append(parts, "no event stream: polling alone")
	}
	if h.PublishError != "" {
		parts = append(parts, "receipts waiting: "+h.PublishError)
	}
	return strings.Join(parts, "; ")
}
