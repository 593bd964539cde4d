package cli

import (
	"github.com/dustin/go-humanize"

	"fmt"
	"maps"
	"slices"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newStatusCmd(a *app.App) *cobra.Command {
	var tmuxLine bool
	cmd := &cobra.Command{
		Use:   "status",
		Short: "Show the health of the service, database, registry, State Hub, queue and leases",
		Long: `Show tamq's health in separate sections: process and socket, SQLite, the gita
registry, State Hub, the queue and delivery leases. When the service is down,
status reports what it can read locally and says so: the windows are shown as
the service last recorded them, each alive, its agent EXITED (with its exit
status), its window CLOSED, or GONE as tmux shows it now. The exit
status is 0 when healthy, else the status of the first problem (8 when the
service is down).
--json prints the document described in docs/status.md.

--tmux-line prints only the line for tmux's status bar: how many tasks need
you and how many agents work, as coordination-engine sees them ("2 need you ·
3 working"), and nothing when neither, or when the engine is not running.
In ~/.tmux.conf: set -g status-right '#(tamq status --tmux-line)'`,
		Example: `  tamq status
  tamq status --json
  tamq status --tmux-line`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if tmuxLine {
				return printTmuxLine(cmd.Context(), a)
			}
			p, err := a.Paths()
			if err != nil {
				return err
			}
			// A bad config file is reported, not fatal: status shows all the
			// rest (read with the defaults when the service is down).
			cfg, cfgErr := a.Config()
			if cfgErr != nil && !errs.Is(cfgErr, errs.ConfigInvalid) {
				return cfgErr
			}
			r, callErr := client.New(p).Status(cmd.Context())
			if callErr != nil {
				if !errs.Is(callErr, errs.Unavailable) {
					return callErr
				}
				local := cfg
				if local == nil {
					local = config.Defaults(p)
				}
				r = status.Collect(cmd.Context(), status.Sources{
					Paths: p, Config: local, Registry: a.Registry, Migrations: store.Migrations, Now: a.Now(),
				})
				r.Service.PolicyProfile, r.Service.ConfigVersion = local.ProfileRef(), local.Version
			}
			r.Config = api.ConfigStatus{File: p.ConfigFile}
			if cfgErr != nil {
				r.Config.Error = cfgErr.Error()
			} else {
				r.Config.Version = cfg.Version
				r.Config.Stale = r.Service.Running && r.Service.ConfigVersion != cfg.Version
			}
			problem := status.Judge(&r)
			return a.Report(r, func() { printStatus(a, r) }, problem)
		},
	}
	cmd.Flags().BoolVar(&tmuxLine, "tmux-line", false, "print only the line for tmux's status bar (what needs you)")
	return cmd
}

func printStatus(a *app.App, r api.StatusReport) {
	tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
	// Nearly every field comes from elsewhere (the registry, the database,
	// tmux, the service's answer), so each line is escaped whole: no name,
	// path or error in it can act in the terminal or break the layout.
	line := func(section, format string, args ...any) {
		fmt.Fprintf(tw, "%s\t%s\n", section, textsafe.Escape(fmt.Sprintf(format, args...)))
	}
	health := "healthy"
	if !r.Healthy {
		health = "UNHEALTHY"
	}
	line("tamq", "%s", health)
	printServiceStatus(line, r)
	printStoreStatus(line, r)
	printStateHubStatus(line, r.StateHub)
	if r.Service.Running {
		printEngineStatus(line, r.Coordination)
	}
	printQueueStatus(line, r)
	printEndpointsStatus(line, r.Endpoints)
	tw.Flush()
}

// statusLine writes one line of status: its section ("" under the one
// above) and its text.
type statusLine func(section, format string, args ...any)

func printServiceStatus(line statusLine, r api.StatusReport) {
	switch c := r.Config; {
	case c.Error != "":
		line("config", "ERROR %s", c.Error)
	case c.Stale:
		line("config", "%s, version %s: CHANGED since the service started (it runs %s); restart it to apply: `tamq stop && tamq start --detach`",
			c.File, c.Version, r.Service.ConfigVersion)
	}
	s := r.Service
	if s.Running {
		line("service", "running, pid %d, up %s, version %s, protocol %s", s.PID,
			time.Duration(s.UptimeSeconds*float64(time.Second)).Round(time.Second), s.ServerVersion, s.Proto)
		if s.Orwell {
			line("", "ORWELL diagnostics on")
		}
	} else {
		line("service", "NOT RUNNING (start it with `tamq start --detach`)")
	}
	line("", "socket %s", s.Socket)
	line("", "policy %s, config %s", s.PolicyProfile, s.ConfigVersion)
}

// printStoreStatus says what tamq reads from disk: its database and the
// registry.
func printStoreStatus(line statusLine, r api.StatusReport) {
	q := r.SQLite
	switch {
	case q.Error != "":
		line("sqlite", "ERROR %s", q.Error)
	case !q.Exists:
		line("sqlite", "%s (not created yet)", q.Path)
	default:
		line("sqlite", "%s, schema %d, %s, WAL %s", q.Path, q.SchemaVersion, bytesText(q.SizeBytes), bytesText(q.WALSizeBytes))
	}

	g := r.Registry
	if g.Error != "" {
		line("registry", "ERROR %s", g.Error)
	} else {
		line("registry", "%s, %d repos", g.Path, g.RepoCount)
		if g.UnregisteredCount > 0 {
			line("", "%d rows are not git repositories (see `tamq repos --all`)", g.UnregisteredCount)
		}
	}
}

func printStateHubStatus(line statusLine, h api.StateHubStatus) {
	reach := "reachable"
	if !h.Reachable {
		reach = "not reachable"
		if h.APIBaseFrom != "" {
			reach = "not reachable (" + h.APIBaseFrom + ")"
		}
	}
	creds := "credentials configured"
	if !h.CredentialsConfigured {
		creds = "no credentials configured"
	}
	if h.Kind != "" && h.Kind != config.KindContract {
		line("statehub", "%s at %s, read by coordination-engine (tamq's receipts go through it)", h.Kind, h.APIBase)
	} else {
		line("statehub", "%s, %s, %s", h.APIBase, reach, creds)
	}
	switch pub := h.Publishing; {
	case pub == nil:
		line("", "%d receipts not yet published (the service publishes them while it runs)", h.UnpublishedReceipts)
	default:
		last := "none published yet"
		if pub.LastSuccessAt != nil {
			last = "last published " + pub.LastSuccessAt.Local().Format(time.DateTime)
		}
		line("", "%d receipts not yet published, via %s, %s", h.UnpublishedReceipts, pub.Via, last)
		if pub.Paused {
			line("", "paused: State Hub refused the credentials (check statehub.credential_command; receipts stay pending)")
		}
		if pub.LastError != "" {
			line("", "last attempt failed, tried again later: %s", pub.LastError)
		}
	}
}

func printEngineStatus(line statusLine, c api.CoordinationStatus) {
	switch {
	case c.Attached:
		ids := make([]string, 0, len(c.Endpoints))
		for _, ep := range slices.Sorted(maps.Keys(c.Endpoints)) {
			ids = append(ids, ep+" as "+c.Endpoints[ep])
		}
		line("engine", "attached (protocol %s): %s", c.Proto, strings.Join(ids, ", "))
	case c.Error != "":
		line("engine", "not attached (tamq works without it): %s", c.Error)
	default:
		line("engine", "not attached yet")
	}
	for _, rf := range c.Refused {
		line("", "refused %s on %s: %s", rf.Repo, rf.EndpointID, rf.Reason)
	}
}

func printQueueStatus(line statusLine, r api.StatusReport) {
	if r.Queue.Error != "" {
		line("queue", "ERROR %s", r.Queue.Error)
	} else {
		var parts []string
		for _, st := range store.MessageStates {
			parts = append(parts, fmt.Sprintf("%s %d", st, r.Queue.Counts[st]))
		}
		line("queue", "%s", strings.Join(parts, ", "))
		if r.Queue.OldestPendingAt != nil {
			line("", "oldest pending since %s", r.Queue.OldestPendingAt.Local().Format(time.DateTime))
		}
		line("", "history %d messages, %s", r.Queue.HistoryMessages, bytesText(r.Queue.HistoryBytes))
	}
	line("leases", "%d active delivery leases, %d expired", r.Leases.ActiveDeliveryLeases, r.Leases.ExpiredDeliveryLeases)
}

func printEndpointsStatus(line statusLine, endpoints []api.Endpoint) {
	if len(endpoints) == 0 {
		line("endpoints", "none (open windows with `tamq open REPO...`)")
	}
	for i, ep := range endpoints {
		section := ""
		if i == 0 {
			section = "endpoints"
			if ep.Recorded {
				// Read from the database: the state is the service's last word
				// (it marks every endpoint disconnected when it stops).
				line(section, "as the service last recorded them (it is not running); alive or GONE as tmux shows them now")
				section = ""
			}
		}
		line(section, "%s %s, tmux %s", ep.ID, ep.State, ep.TmuxSocket)
		for _, w := range ep.Windows {
			alive := w.Liveness()
			cmd := w.Command
			if cmd == "" {
				cmd = "(shell)"
			}
			if ep.Recorded {
				// No service: no broker session to tell of.
				line("", "  %s: window %s pane %s, %s, %s, %s", w.Repo, w.WindowID, w.PaneID, w.Mode, cmd, alive)
			} else {
				brk := "no broker"
				if w.Broker {
					brk = "broker attached"
				}
				line("", "  %s: window %s pane %s, %s, %s, %s, %s", w.Repo, w.WindowID, w.PaneID, w.Mode, cmd, alive, brk)
			}
			if w.WaitReason != "" || w.Waiting > 0 {
				why := ""
				if w.WaitReason != "" {
					why = ": " + w.WaitReason
				}
				line("", "    %d queued%s", w.Waiting, why)
			}
		}
	}
}

// bytesText is a size in SI units, as purge's figures are given.
func bytesText(n int64) string { return humanize.Bytes(uint64(max(n, 0))) }
