package service

import (
	"context"
	"errors"
	"log/slog"
	"maps"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/backoff"
	"github.com/tmux-amq/tamq/internal/clock"
	"github.com/tmux-amq/tamq/internal/daemon"
	engineapi "github.com/tmux-amq/tamq/internal/engineapi"
	engineclient "github.com/tmux-amq/tamq/internal/engineclient"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// How the attacher paces itself: while the engine is absent it tries again
// after a delay that doubles from half a second up to five (attachBackoff);
// once attached it pings the engine every attachCheck, to notice a restart
// (a new engine attaches nothing until told) or a stop.
const (
	attachCheck   = 3 * time.Second
	detachTimeout = 500 * time.Millisecond
)

// attachBackoff: dialing a socket nobody listens on costs next to nothing,
// so the engine is looked for often enough that it is found soon after it
// starts.
var attachBackoff = backoff.Policy{Min: 500 * time.Millisecond, Max: 5 * time.Second}

// attachment is the attacher: tamq's link to coordination-engine, kept
// while the engine runs, and as status shows it.
type attachment struct {
	log    *slog.Logger
	clock  clock.Clock
	engine *engineclient.Client
	// endpoints are handed over; agentRunning says whether an agent runs in
	// a window (by delivery key); linkChanged is told when the link comes
	// up or goes down (the receipts' way to State Hub changes with it).
	endpoints    endpointLister
	agentRunning func(key string) *bool
	linkChanged  func(attached bool)

	mu     sync.Mutex
	status api.CoordinationStatus
	// pinged is the engine instance attached to (its pid and start), so a
	// restarted engine is attached to again.
	pinged daemon.PingResult
	// attached are the tamq endpoints the engine accepted.
	attached map[string]bool
	// again makes the attacher hand the endpoints over again now: they
	// changed, or an agent started or exited in one of their windows.
	again wakeup.Signal
}

func (a *attachment) snapshot() api.CoordinationStatus {
	a.mu.Lock()
	defer a.mu.Unlock()
	st := a.status
	st.Capabilities, st.Refused, st.Endpoints = slices.Clone(st.Capabilities), slices.Clone(st.Refused), maps.Clone(st.Endpoints)
	return st
}

// run is the attacher worker: it hands tamq's endpoints to
// coordination-engine whenever they change or the engine comes (back), and
// otherwise keeps quiet: tamq works fully without the engine.
func (a *attachment) run(ctx context.Context) {
	failing := time.Duration(0)
	for {
		wait := attachCheck
		if err := a.attachOnce(ctx, a.engine); err != nil {
			failing = attachBackoff.Next(failing)
			wait = failing
			a.log.Debug("not attached to coordination-engine; will try again", "in", wait.String(), "error", err.Error())
		} else {
			failing = 0
		}
		select {
		case <-ctx.Done():
			return
		case <-a.again.C():
			a.mu.Lock()
			a.pinged = daemon.PingResult{} // hand everything over again
			a.mu.Unlock()
		case <-a.clock.After(wait):
		}
	}
}

// attachOnce checks the engine is the one attached to, and attaches every
// connected endpoint when it is not (a first attach, a restarted engine, a
// kick after endpoints changed).
func (a *attachment) attachOnce(ctx context.Context, c *engineclient.Client) error {
	pctx, cancel := context.WithTimeout(ctx, time.Second)
	ping, err := c.Ping(pctx)
	cancel()
	if err != nil {
		a.mu.Lock()
		was := a.status.Attached
		a.status = api.CoordinationStatus{Socket: a.status.Socket, Error: err.Error()}
		a.pinged, a.attached = daemon.PingResult{}, map[string]bool{}
		a.mu.Unlock()
		if was {
			a.linkChanged(false) // receipts go straight to State Hub now
		}
		return err
	}
	a.mu.Lock()
	same := a.pinged.PID == ping.PID && a.pinged.StartedAt.Equal(ping.StartedAt)
	a.mu.Unlock()
	if same {
		return nil
	}
	eps, err := a.endpoints.known(ctx)
	if err != nil {
		return err
	}
	st := api.CoordinationStatus{Socket: a.status.Socket, Endpoints: map[string]string{}}
	attached := map[string]bool{}
	var errAll error
	for _, ep := range eps {
		if ep.State != queue.Connected || len(ep.Windows) == 0 {
			continue
		}
		res, err := c.Attach(ctx, attachArgs(ep, a.agentRunning))
		if err != nil {
			errAll = errors.Join(errAll, err)
			continue
		}
		attached[ep.ID] = true
		st.Endpoints[ep.ID] = res.CoordinationEndpointID
		st.Proto, st.Capabilities = res.Proto, res.Capabilities
		for _, r := range res.Refused {
			st.Refused = append(st.Refused, api.AttachRefusal{EndpointID: ep.ID, Repo: r.Repo, Reason: r.Reason})
		}
		a.log.Info("attached to coordination-engine", "endpoint", ep.ID, "coordination_endpoint_id", res.CoordinationEndpointID,
			"accepted", len(res.Accepted), "refused", len(res.Refused))
	}
	// Endpoints attached before and not now (their tmux server is gone)
	// take no wakes any more.
	a.mu.Lock()
	before := a.attached
	a.mu.Unlock()
	for id := range before {
		if !attached[id] {
			dctx, cancel := context.WithTimeout(ctx, detachTimeout)
			c.Detach(dctx, engineapi.DetachArgs{EndpointID: id, Reason: "its tmux server is gone"})
			cancel()
		}
	}
	now := a.clock.Now()
	st.AttachedAt = &now
	st.Attached = errAll == nil && len(attached) > 0
	if errAll != nil {
		st.Error = errAll.Error()
	}
	sort.Slice(st.Refused, func(i, j int) bool { return st.Refused[i].Repo < st.Refused[j].Repo })
	a.mu.Lock()
	was := a.status.Attached
	a.status, a.attached = st, attached
	if errAll == nil {
		a.pinged = ping
	}
	a.mu.Unlock()
	if was != st.Attached {
		a.linkChanged(st.Attached) // receipts go through the engine now, or no longer
	}
	return errAll
}

// attachArgs is the handshake of one endpoint. agent says, by delivery key,
// whether an agent is a window's foreground program (nil: not known yet,
// which the engine takes as running); a change is handed over again
// (noteAgent).
func attachArgs(ep queue.Endpoint, agent func(key string) *bool) engineapi.AttachArgs {
	args := engineapi.AttachArgs{
		EndpointID: ep.ID, TmuxSession: ep.Session, TmuxSocket: ep.TmuxSocket,
		Proto: unixrpc.Version, Capabilities: []string{engineapi.CapWake},
	}
	for _, w := range ep.Windows {
		args.Windows = append(args.Windows, engineapi.AttachWindow{Repo: w.Repo, Path: w.RepoPath, Command: w.Command, Mode: string(w.Mode),
			AgentRunning: agent(store.DeliveryKey(ep.ID, w.Repo))})
	}
	return args
}

// detachAll tells the engine, briefly, that this service's endpoints take
// no wakes now; an engine that does not answer learns it at the next attach.
func (a *attachment) detachAll() {
	a.mu.Lock()
	ids := make([]string, 0, len(a.attached))
	for id := range a.attached {
		ids = append(ids, id)
	}
	a.attached = map[string]bool{}
	a.mu.Unlock()
	for _, id := range ids {
		ctx, cancel := context.WithTimeout(context.Background(), detachTimeout)
		if err := a.engine.Detach(ctx, engineapi.DetachArgs{EndpointID: id, Reason: "tamq stopped"}); err != nil && !errs.Is(err, errs.Unavailable) {
			a.log.Debug("cannot detach from coordination-engine", "endpoint", id, "error", err.Error())
		}
		cancel()
	}
}
