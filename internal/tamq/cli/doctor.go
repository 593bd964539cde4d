package cli

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"
	"time"

	"github.com/dustin/go-humanize/english"
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/reltime"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
)

func newDoctorCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check tamq's setup: tmux, gita, repos, socket, state, service, engine, windows, queue, State Hub, clock, disk",
		Long: `Check what a tamq setup gets wrong: tmux installed and new enough, the gita
registry and the repositories in it, the socket and state directory private,
the service running this build, attached to coordination-engine, no message
waiting longer than 30 minutes to be delivered, State Hub reachable and its
credentials accepted, the clock, and the free disk space.
State Hub and coordination-engine only warn: tamq works without them.

` + app.DoctorLong,
		Example: `  tamq doctor
  tamq doctor --quiet
  tamq doctor --json | jq '.checks[] | select(.status != "ok")'`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.Doctor(a, tamqChecks(cmd.Context(), a))
		},
	}
}

// tamqChecks runs tamq's checks in order; each is bounded (see doctor).
func tamqChecks(ctx context.Context, a *app.App) []doctor.Check {
	p, err := a.Paths()
	if err != nil {
		// Without paths nothing else can be looked at.
		return []doctor.Check{doctor.Config(a.Name(), nil, err, "")}
	}
	cfg, check := app.DoctorConfig(a, p)
	checks := []doctor.Check{check}
	checks = append(checks, doctor.Tmux(ctx))
	reg, regErr := a.Registry()
	checks = append(checks, doctor.Registry(reg, regErr), doctor.GitaTool())
	if regErr == nil {
		checks = append(checks, doctor.Repos(reg))
	}
	checks = append(checks, doctor.Socket(p), doctor.StateDir(p))
	svc, running := doctor.Service(ctx, p, buildinfo.Get().Version)
	checks = append(checks, svc, engineCheck(ctx, a, running), windowsCheck(ctx, a, cfg, running), queueCheck(ctx, a, cfg))
	if kind := cfg.StateHub.HubKind(); kind != config.KindContract {
		checks = append(checks, doctor.Passed("statehub", "State Hub is "+kind+": coordination-engine reads it (its doctor checks it); tamq's receipts go through the engine"))
	} else {
		hub, reachable := doctor.StateHub(ctx, cfg, doctor.Warn, " (tamq works without it: receipts wait until it answers)")
		checks = append(checks, hub)
		if len(cfg.StateHub.CredentialCommand) > 0 {
			checks = append(checks, doctor.StateHubAuth(ctx, cfg, reachable, doctor.Warn))
		}
	}
	return append(checks,
		doctor.ClockAt(ctx, a.Name(), a.Now(), p.Database, store.Migrations, store.NewestTime),
		doctor.DiskAt(p.StateDir, p.Database, fmt.Sprintf("free space in that file system (`df -h %s`), or shrink the history with `tamq purge`", p.StateDir)),
	)
}

// windowsCheck names the windows whose agent has exited (with its exit
// status) or that were closed, on each tmux socket's newest endpoint: from
// the running service's status, or, with it down, from what it last
// recorded and what tmux shows now. Only a warning: a person may have quit
// the agent on purpose; nothing is delivered there until it runs again, and
// `tamq start` does not run it again.
func windowsCheck(ctx context.Context, a *app.App, cfg *config.Loaded, running bool) doctor.Check {
	p, _ := a.Paths()
	var eps []api.Endpoint
	if running {
		sctx, cancel := context.WithTimeout(ctx, doctor.StatusTimeout)
		r, err := client.New(p).Status(sctx)
		cancel()
		if err != nil {
			return doctor.Warning("windows", "cannot ask the service: "+err.Error(), "see `tamq status`")
		}
		eps = r.Endpoints
	} else {
		db, ok, err := openHistoryAt(ctx, p, cfg)
		if err != nil {
			return doctor.Warning("windows", "cannot read the recorded windows: "+err.Error(), "see `tamq status`")
		}
		if !ok {
			return doctor.Passed("windows", "no window recorded yet")
		}
		defer db.Close()
		recorded, err := store.Endpoints(ctx, db, false)
		if err != nil {
			return doctor.Warning("windows", "cannot read the recorded windows: "+err.Error(), "see `tamq status`")
		}
		eps = status.Recorded(ctx, recorded)
	}
	e := endedWindowsOf(eps)
	if len(e.ended) == 0 {
		return doctor.Passed("windows", fmt.Sprintf("%d %s recorded, none whose agent exited or that was closed", e.n, english.PluralWord(e.n, "window", "windows")))
	}
	return doctor.Warning("windows", strings.Join(e.ended, "; ")+" (nothing is delivered there, and `tamq start` does not run it again)",
		e.rerunHint()+"; see `tamq status`")
}

// queueWaitWarn is how long a message may wait to be delivered before
// doctor warns. Retries and ack deadlines end within minutes (4 attempts,
// 5 s to 5 min apart, by default), so a message pending this long waits for
// a window that cannot take it (a shell in it, the agent gone) and may wait
// forever.
const queueWaitWarn = 30 * time.Minute

// queueCheck warns of a message that has waited longer than queueWaitWarn,
// read from the database (the service need not run). Only a warning: the
// message goes in once its window can take it.
func queueCheck(ctx context.Context, a *app.App, cfg *config.Loaded) doctor.Check {
	p, _ := a.Paths()
	db, ok, err := openHistoryAt(ctx, p, cfg)
	if err != nil {
		return doctor.Warning("queue", "cannot read the queue: "+err.Error(), "see `tamq status`")
	}
	if !ok {
		return doctor.Passed("queue", "no message yet")
	}
	defer db.Close()
	now := a.Now()
	st, err := store.Stats(ctx, db, now)
	if err != nil {
		return doctor.Warning("queue", "cannot read the queue: "+err.Error(), "see `tamq status`")
	}
	return queueWait(now, st.OldestPendingAt, st.Counts)
}

// queueWait is the queue check from the oldest pending message's creation
// (zero: none) and the counts by state.
func queueWait(now, oldest time.Time, counts map[string]int) doctor.Check {
	if oldest.IsZero() || now.Sub(oldest) < queueWaitWarn {
		return doctor.Passed("queue", fmt.Sprintf("no message has waited %s or longer to be delivered (%d queued)",
			reltime.Span(queueWaitWarn), counts["queued"]))
	}
	return doctor.Warning("queue", fmt.Sprintf("a message has waited %s to be delivered (sent %s; %d queued, %d awaiting an ack)",
		reltime.Span(now.Sub(oldest)), oldest.Local().Format(time.DateTime), counts["queued"], counts["awaiting_ack"]),
		"`tamq status` says why each window waits; `tamq history --state queued` lists the messages; `tamq cancel ID` drops one no window will take")
}

// engineCheck says whether tamq is attached to coordination-engine, as the
// running service's status reports it. Only a warning: tamq works alone, and
// the engine is what wakes agents from State Hub.
func engineCheck(ctx context.Context, a *app.App, running bool) doctor.Check {
	c := doctor.Check{Name: "engine", Status: doctor.Warn}
	if !running {
		c.Detail = "not attached to coordination-engine: tamq's service is not running (tamq works without the engine)"
		c.Fix = "`tamq start --detach`; it attaches to coordination-engine whenever that runs"
		return c
	}
	p, _ := a.Paths()
	sctx, cancel := context.WithTimeout(ctx, doctor.StatusTimeout)
	defer cancel()
	r, err := client.New(p).Status(sctx)
	if err != nil {
		c.Detail = "cannot ask the service: " + err.Error()
		c.Fix = "see `tamq status`"
		return c
	}
	co := r.Coordination
	switch {
	case co.Attached:
		ids := make([]string, 0, len(co.Endpoints))
		for _, ep := range slices.Sorted(maps.Keys(co.Endpoints)) {
			ids = append(ids, ep+" as "+co.Endpoints[ep])
		}
		return doctor.Check{Name: "engine", Status: doctor.OK, Detail: "attached to coordination-engine: " + strings.Join(ids, ", ")}
	case co.Error != "":
		c.Detail = "not attached to coordination-engine (tamq works without it): " + co.Error
		c.Fix = "`coordination-engine start --detach` if agents should be woken from State Hub"
	default:
		c.Detail = "not attached to coordination-engine: no tmux window to hand over yet"
		c.Fix = "open windows with `tamq open REPO...`; tamq attaches them to the engine"
	}
	return c
}
