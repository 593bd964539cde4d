// Package status assembles tamq's health report. The service fills it with live
// figures; the CLI fills what it can from local files when the service is down,
// with the endpoints as the service last recorded them.
package status

import (
	"context"
	"database/sql"
	"slices"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
)

// ProbeTimeout bounds the State Hub reachability check.
const ProbeTimeout = time.Second

// Sources are what a report is read from.
type Sources struct {
	Paths      paths.Paths
	Config     *config.Loaded
	Registry   func() (*gita.Registry, error)
	Migrations []sqlitedb.Migration
	// DB is a reader of the database, or nil to open one read-only (service down).
	DB  *sql.DB
	Now time.Time
}

// Collect fills every section except Service, which the caller sets.
func Collect(ctx context.Context, src Sources) api.StatusReport {
	r := api.StatusReport{
		Service: daemon.StoppedStatus(src.Paths),
	}
	r.SQLite = daemon.DatabaseStatus(ctx, src.DB, src.Paths.Database, src.Migrations)
	r.Registry = daemon.RegistryStatus(src.Registry)

	r.StateHub = api.StateHubStatus{
		Kind:                  src.Config.StateHub.HubKind(),
		APIBase:               textsafe.RedactURL(src.Config.StateHub.APIBase),
		APIBaseFrom:           src.Config.APIBaseOrigin(),
		CredentialsConfigured: src.Config.HasCredentialCommand(),
	}
	// Another kind than the contract (GitHub) is the engine's to read:
	// tamq has nothing to ask it.
	if r.StateHub.Kind == config.KindContract {
		if err := statehub.Probe(ctx, src.Config.StateHub.APIBase, ProbeTimeout); err != nil {
			r.StateHub.Error = err.Error()
		} else {
			r.StateHub.Reachable = true
		}
	}

	r.Queue.Counts = map[string]int{}
	for _, s := range store.MessageStates {
		r.Queue.Counts[s] = 0
	}
	db := src.DB
	if db == nil && r.SQLite.Exists && r.SQLite.Error == "" {
		ro, err := sqlitedb.OpenReadOnly(ctx, src.Paths.Database, r.SQLite.BinarySchemaVersion, src.Config.BusyTimeout())
		if err != nil {
			r.Queue.Error = err.Error()
		} else {
			defer ro.Close()
			db = ro
		}
	}
	if db != nil && r.SQLite.SchemaVersion >= 1 {
		st, err := store.Stats(ctx, db, src.Now)
		if err != nil {
			r.Queue.Error, r.Leases.Error = err.Error(), err.Error()
		} else {
			r.Queue.Counts = st.Counts
			if !st.OldestPendingAt.IsZero() {
				t := st.OldestPendingAt
				r.Queue.OldestPendingAt = &t
			}
			r.Queue.HistoryMessages, r.Queue.HistoryBytes = st.HistoryMessages, st.HistoryBytes
			r.Leases = api.LeaseStatus{ActiveDeliveryLeases: st.ActiveLeases, ExpiredDeliveryLeases: st.ExpiredLeases}
			r.StateHub.UnpublishedReceipts = st.UnpublishedReceipts
		}
		if eps, err := store.Endpoints(ctx, db, false); err == nil {
			if src.DB != nil {
				r.Endpoints = Live(ctx, eps)
			} else {
				r.Endpoints = Recorded(ctx, eps)
			}
			if queued, err := store.QueuedByWindow(ctx, db); err == nil {
				for i, ep := range r.Endpoints {
					for j, w := range ep.Windows {
						r.Endpoints[i].Windows[j].Waiting = queued[store.DeliveryKey(ep.ID, w.Repo)]
					}
				}
			}
		}
	}
	if r.Endpoints == nil {
		r.Endpoints = []api.Endpoint{}
	}
	return r
}

// liveTimeout bounds the question to one tmux server: a hung server must
// not hang status.
const liveTimeout = 2 * time.Second

// Live is the wire form of the recorded endpoints with whether each window's
// pane is alive: one tmux call per connected endpoint, however many windows
// it has (a disconnected one has none alive).
func Live(ctx context.Context, eps []queue.Endpoint) []api.Endpoint {
	out := []api.Endpoint{}
	for _, ep := range eps {
		rec := api.EndpointOf(ep)
		if ep.State == queue.Connected {
			askCtx, cancel := context.WithTimeout(ctx, liveTimeout)
			wins, err := (tmux.Server{Socket: ep.TmuxSocket}).ListWindows(askCtx)
			cancel()
			if err == nil {
				seen(rec.Windows, byPane(wins))
			}
		}
		out = append(out, rec)
	}
	return out
}

// byPane indexes a server's windows by their pane.
func byPane(wins []tmux.Window) map[string]tmux.Window {
	out := map[string]tmux.Window{}
	for _, w := range wins {
		out[w.PaneID] = w
	}
	return out
}

// seen fills in, for windows of the very tmux server that listed panes,
// whether each is alive and, when its agent ended, how: its pane dead (with
// the exit status tmux keeps) or its window closed. What the service
// recorded stands for a window no longer marked for its repo.
func seen(ws []api.EndpointWindow, panes map[string]tmux.Window) {
	for i := range ws {
		w := &ws[i]
		tw, ok := panes[w.PaneID]
		switch {
		case !ok:
			w.SetEnd(queue.WindowClosed, -1)
		case tw.Repo != w.Repo:
			w.Alive = !tw.Dead
		case tw.Dead:
			w.SetEnd(queue.AgentExited, tw.DeadStatus)
		default:
			w.Alive = true
			w.SetEnd("", -1)
		}
	}
}

// Recorded is the wire form of the endpoints as the service last recorded
// them, for status while the service is down, each marked Recorded. The
// service marks its endpoints disconnected when it stops, yet their tmux
// servers and windows live on; so whether each window is alive is asked of
// tmux now, whatever the recorded state: one call per tmux server, however
// many endpoints and windows it has. A window counts as alive only on the
// very server recorded (the same pid): a newer server on the socket has
// panes of its own, whose ids may repeat the old ones.
func Recorded(ctx context.Context, eps []queue.Endpoint) []api.Endpoint {
	type server struct {
		pid   int
		panes map[string]tmux.Window
	}
	servers := map[string]server{}
	out := []api.Endpoint{}
	for _, ep := range eps {
		srv, asked := servers[ep.TmuxSocket]
		if !asked {
			askCtx, cancel := context.WithTimeout(ctx, liveTimeout)
			pid, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
			cancel()
			if err == nil {
				srv = server{pid: pid, panes: byPane(wins)}
			}
			servers[ep.TmuxSocket] = srv
		}
		rec := api.EndpointOf(ep)
		rec.Recorded = true
		if srv.pid != 0 && srv.pid == ep.ServerPID {
			seen(rec.Windows, srv.panes)
		}
		out = append(out, rec)
	}
	return out
}

// Judge sets Healthy and returns the error that sums up what is wrong, or nil;
// its code gives status its exit status. State Hub being unreachable is not
// unhealthy: tamq works without it and queues the projections.
func Judge(r *api.StatusReport) error {
	var err error
	if r.Config.Error != "" {
		err = errs.New(errs.ConfigInvalid, "%s", r.Config.Error)
	} else {
		err = daemon.StatusProblem(paths.Tamq, r.Service, r.SQLite, r.Registry)
	}
	switch {
	case err != nil:
	case r.Queue.Error != "":
		err = errs.New(errs.Storage, "queue: %s", r.Queue.Error)
	default:
		if ep := goneEndpoint(r.Endpoints); ep != nil {
			err = errs.New(errs.Unavailable, "endpoint %s is disconnected: its tmux server (%s) is gone", ep.ID, ep.TmuxSocket).
				WithHint("bring its windows back with `tamq start --tmux-socket %s` or `tamq open`, or forget it with `tamq endpoints forget %s`", ep.TmuxSocket, ep.ID)
		}
	}
	r.Healthy = err == nil
	return err
}

// goneEndpoint is the first endpoint whose tmux server is gone and that
// nothing has replaced: no connected endpoint on the same socket, and not
// forgotten. Its windows cannot be reached. One whose every window's agent
// had ended (exited, or closed) lost nothing a restart would bring back.
func goneEndpoint(eps []api.Endpoint) *api.Endpoint {
	replaced := map[string]bool{}
	for _, ep := range eps {
		if ep.State == string(queue.Connected) {
			replaced[ep.TmuxSocket] = true
		}
	}
	for i, ep := range eps {
		running := slices.ContainsFunc(ep.Windows, func(w api.EndpointWindow) bool { return w.Ended == "" })
		if ep.State != string(queue.Connected) && !ep.Forgotten && !replaced[ep.TmuxSocket] && running {
			return &eps[i]
		}
	}
	return nil
}
