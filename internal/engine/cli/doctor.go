package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/doctor"
	"github.com/tmux-amq/tamq/internal/doctor/beadscheck"
	"github.com/tmux-amq/tamq/internal/doctor/clustercheck"
	"github.com/tmux-amq/tamq/internal/doctor/githubcheck"
	"github.com/tmux-amq/tamq/internal/engine/service"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	client "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/beads"
	"github.com/tmux-amq/tamq/internal/statehub/github"
	"github.com/tmux-amq/tamq/internal/statehub/kinds"
	"github.com/tmux-amq/tamq/internal/tamqclient"
)

func newDoctorCmd(a *app.App) *cobra.Command {
	return &cobra.Command{
		Use:   "doctor",
		Short: "Check the engine's setup: config and policy, gita, socket, state, service, tamq, State Hub, clock, disk",
		Long: `Check what a coordination-engine setup gets wrong: the config file and its
policy profile, the gita registry and the repositories in it, the socket and
state directory private, the engine running this build, tamq answering with
endpoints attached, State Hub reachable and taking the credentials (the
engine watches it: not reachable fails), the clock, and the free disk space.

` + app.DoctorLong,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return app.Doctor(a, engineChecks(cmd.Context(), a))
		},
	}
}

// engineChecks runs the engine's checks in order; each is bounded (see doctor).
func engineChecks(ctx context.Context, a *app.App) []doctor.Check {
	p, err := a.Paths()
	if err != nil {
		return []doctor.Check{doctor.Config(a.Name(), nil, err, "")}
	}
	// Loading the config validates the policy profile: an invalid one is
	// reported here, as it stops the engine's start.
	cfg, check := app.DoctorConfig(a, p)
	checks := []doctor.Check{check}
	reg, regErr := a.Registry()
	checks = append(checks, doctor.Registry(reg, regErr))
	if regErr == nil {
		checks = append(checks, doctor.Repos(reg))
	}
	checks = append(checks, doctor.Socket(p), doctor.StateDir(p))
	svc, running := doctor.Service(ctx, p, buildinfo.Get().Version)
	checks = append(checks, svc, tamqCheck(ctx, a, p, running))
	if running {
		checks = append(checks, tasksCheck(ctx, p))
	}
	checks = append(checks, stateHubChecks(ctx, a, cfg)...)
	if cfg.ClusterOn() {
		// Several hosts share their claims in etcd ([cluster]): it must
		// answer, take the credentials, keep time with this host, and
		// hold only claims under the prefix.
		checks = append(checks, clustercheck.Run(ctx, cfg.Cluster, cfg.File, "", service.ClaimTTL(service.Timing(cfg.Config)))...)
	}
	return append(checks,
		doctor.ClockAt(ctx, a.Name(), a.Now(), p.Database, store.Migrations, store.NewestTime),
		doctor.DiskAt(p.StateDir, p.Database, fmt.Sprintf("free space in that file system (`df -h %s`)", p.StateDir)),
	)
}

// stateHubChecks check State Hub as its kind is read: the contract's
// reachability and credentials, or GitHub's token, repositories and budget.
func stateHubChecks(ctx context.Context, a *app.App, cfg *config.Loaded) []doctor.Check {
	if kind := cfg.StateHub.HubKind(); kind == config.KindGitHub || kind == config.KindBeads {
		hub, err := kinds.Open(cfg, a.Registry, nil)
		if err != nil {
			return []doctor.Check{doctor.Failed("statehub", err.Error(), doctor.FixOf(err, "fix [statehub] in "+cfg.File))}
		}
		if d, ok := hub.(*beads.Driver); ok {
			return beadscheck.Run(ctx, d, cfg)
		}
		return githubcheck.Run(ctx, hub.(*github.Driver), cfg)
	}
	hub, reachable := doctor.StateHub(ctx, cfg, doctor.Fail, " (the engine watches State Hub: nothing wakes agents while it is away)")
	checks := []doctor.Check{hub}
	if reachable || len(cfg.StateHub.CredentialCommand) > 0 {
		checks = append(checks, doctor.StateHubAuth(ctx, cfg, reachable, doctor.Fail))
	}
	return checks
}

// tamqCheck says whether tamq answers on the socket the engine wakes
// through, and whether it has attached endpoints (windows the engine can
// wake). A warning when not: the engine still watches State Hub and keeps
// its leases, but wakes nobody.
func tamqCheck(ctx context.Context, a *app.App, p paths.Paths, running bool) doctor.Check {
	c := doctor.Check{Name: "tamq", Status: doctor.Warn}
	tp, err := paths.Resolve(paths.Tamq, a.Getenv)
	if err != nil {
		c.Detail, c.Fix = err.Error(), "fix the environment as the error says"
		return c
	}
	pctx, cancel := context.WithTimeout(ctx, doctor.PingTimeout)
	ping, err := tamqclient.New(tp).Ping(pctx)
	cancel()
	if err != nil {
		c.Detail = "tamq does not answer, so the engine cannot wake any agent: " + err.Error()
		c.Fix = "`tamq start --detach` (and `tamq open REPO...` for the windows to wake)"
		return c
	}
	if !running {
		c.Detail = fmt.Sprintf("tamq answers (pid %d), but the engine is not running: no endpoint is attached", ping.PID)
		c.Fix = "`coordination-engine start --detach`; tamq attaches its windows to it"
		return c
	}
	sctx, cancel := context.WithTimeout(ctx, doctor.StatusTimeout)
	defer cancel()
	r, err := client.New(p).Status(sctx)
	if err != nil {
		c.Detail, c.Fix = "cannot ask the engine: "+err.Error(), "see `coordination-engine status`"
		return c
	}
	var attached []string
	for _, e := range r.Endpoints {
		if e.State == "attached" {
			attached = append(attached, e.TamqEndpointID+" as "+e.CoordinationEndpointID)
		}
	}
	if len(attached) == 0 {
		c.Detail = fmt.Sprintf("tamq answers (pid %d), but has attached no endpoint: there is no window to wake", ping.PID)
		c.Fix = "open windows with `tamq open REPO...`; tamq attaches them within seconds"
		return c
	}
	return doctor.Check{Name: "tamq", Status: doctor.OK,
		Detail: fmt.Sprintf("tamq answers (pid %d); attached: %s", ping.PID, strings.Join(attached, ", "))}
}

// tasksCheck counts the tasks that need a person, from the running engine's
// last observation: a warning when some do, so the summary says where a
// person is needed, not a failure of the setup.
func tasksCheck(ctx context.Context, p paths.Paths) doctor.Check {
	c := doctor.Check{Name: "tasks", Status: doctor.OK}
	pctx, cancel := context.WithTimeout(ctx, doctor.PingTimeout)
	res, err := client.New(p).Tasks(pctx, api.TasksArgs{Limit: 1})
	cancel()
	switch {
	case err != nil:
		c.Status, c.Detail, c.Fix = doctor.Warn, "cannot list the tasks: "+err.Error(), "see `coordination-engine status`"
	case res.ObservedAt == nil:
		c.Detail = "State Hub not observed yet"
	case res.Counts["needs_you"] > 0:
		c.Status = doctor.Warn
		c.Detail = fmt.Sprintf("%d need you (tasks gated, blocked, out of retries, or at a dialog)", res.Counts["needs_you"])
		c.Fix = "`coordination-engine tasks --needs-you` says which and why"
	default:
		c.Detail = fmt.Sprintf("none needs you; %d working", res.Counts["working"])
	}
	return c
}
