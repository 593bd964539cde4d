package service

import (
	"context"
	"strconv"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/ackmode"
	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/queue"
	"github.com/tmux-amq/tamq/internal/tamq/program"
	"github.com/tmux-amq/tamq/internal/tamq/status"
	"github.com/tmux-amq/tamq/internal/tamq/store"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/tmux"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// OperatorLabel is the sender of messages sent from outside any tamq window.
const OperatorLabel = "operator"

func (s *Service) register(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.RegisterArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	// From a window, a registration could make a repo ambiguous (two
	// endpoints) and so stop every wake and send to it.
	if err := s.notFromAWindow(ctx, peer, "register windows"); err != nil {
		return nil, err
	}
	ep := args.Endpoint.Domain()
	// An endpoint is registered twice by an open: first alone, as soon as its
	// tmux server is known (before any window's program starts), then with
	// its windows.
	if ep.ID != "tmux-amq-"+strconv.Itoa(ep.ServerPID) || ep.ServerPID <= 0 || ep.TmuxSocket == "" {
		return nil, errs.New(errs.BadRequest, "register needs an endpoint id tmux-amq-<pid> matching its tmux server pid, and its tmux socket")
	}
	reg, err := s.opts.Registry()
	if err != nil {
		return nil, err
	}
	for _, w := range ep.Windows {
		repo, err := reg.Resolve(w.Repo)
		if err != nil {
			return nil, err
		}
		if repo.Path != w.RepoPath {
			return nil, errs.New(errs.Conflict, "window for %q reports path %s, but gita registers %s", w.Repo, w.RepoPath, repo.Path)
		}
		if w.Mode != queue.Trigger && w.Mode != queue.Manual && !(w.Mode == "" && w.Reused) {
			return nil, errs.New(errs.BadRequest, "window mode %q is not trigger or manual", w.Mode)
		}
	}
	if err := s.verifyRegistration(ctx, ep); err != nil {
		s.log.Warn("registration refused", "endpoint", ep.ID, "error", err.Error())
		return nil, err
	}
	if err := s.checkTriggerWindows(ctx, ep); err != nil {
		return nil, err
	}
	err = s.store.Endpoints.Register(ctx, ep)
	s.endpointsChanged()
	if err != nil {
		return nil, err
	}
	// The windows are looked at again (a reopened window clears what held its
	// deliveries), and messages stranded on a gone endpoint of the same
	// socket move here.
	s.live.requestRebind(ep.ID)
	s.wake()
	return map[string]string{"endpoint_id": ep.ID}, nil
}

// verifyRegistration asks the endpoint's tmux server itself whether what a
// registration says holds: the server answers with the pid the endpoint is
// named after, and each window's pane is there, in a window marked for its
// repo. A window already recorded on a live pane is never moved to another
// pane while that one still runs marked for the repo: deliveries would go
// where the registering process chose, not where the agent is.
func (s *Service) verifyRegistration(ctx context.Context, ep queue.Endpoint) error {
	askCtx, cancel := askTmux(ctx)
	pid, wins, err := (tmux.Server{Socket: ep.TmuxSocket}).Snapshot(askCtx)
	cancel()
	if err != nil {
		return errs.Wrap(errs.CodeOf(err), err, "cannot register endpoint %s: cannot ask its tmux server", ep.ID)
	}
	if pid != ep.ServerPID {
		return errs.New(errs.PermissionDeny, "cannot register endpoint %s: the tmux server on %s has pid %d", ep.ID, ep.TmuxSocket, pid)
	}
	panes := map[string]tmux.Window{}
	for _, w := range wins {
		panes[w.PaneID] = w
	}
	known, err := s.knownEndpoints(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]string{} // repo -> pane, on this endpoint
	for _, k := range known {
		if k.ID == ep.ID {
			for _, w := range k.Windows {
				recorded[w.Repo] = w.PaneID
			}
		}
	}
	for _, w := range ep.Windows {
		p, ok := panes[w.PaneID]
		if !ok || p.Repo != w.Repo {
			return errs.New(errs.PermissionDeny, "cannot register the window of %q: pane %s is not in a window marked for it on %s", w.Repo, w.PaneID, ep.TmuxSocket)
		}
		if old := recorded[w.Repo]; old != "" && old != w.PaneID {
			if o, ok := panes[old]; ok && !o.Dead && o.Repo == w.Repo {
				return errs.New(errs.Conflict, "cannot move the window of %q to pane %s: its pane %s still runs", w.Repo, w.PaneID, old).
					WithHint("close that window first, or use it: `tamq open %s` reuses it", w.Repo)
			}
		}
	}
	return nil
}

// checkTriggerWindows refuses a trigger-mode window whose command is the
// user's shell or another shell: coordination-engine's wakes would be
// written into it and run as commands. A reused window's command is the one
// recorded; one with none recorded (opened without --command, or without the
// service) counts as the user's shell, as the wake that would follow does.
func (s *Service) checkTriggerWindows(ctx context.Context, ep queue.Endpoint) error {
	known, err := s.knownEndpoints(ctx)
	if err != nil {
		return err
	}
	recorded := map[string]string{}
	for _, k := range known {
		if k.ID == ep.ID {
			for _, w := range k.Windows {
				recorded[w.Repo] = w.Command
			}
		}
	}
	for _, w := range ep.Windows {
		command := w.Command
		if w.Reused {
			command = recorded[w.Repo]
		}
		if w.Mode == queue.Trigger && program.CommandIsShell(command) {
			what := "runs your shell (no agent command is recorded for it)"
			if command != "" {
				what = "runs a shell (" + textsafe.Escape(command) + ")"
			}
			return errs.New(errs.Usage, "the window of %s %s: trigger mode would let coordination-engine type its prompts into a shell, which runs them as commands", w.Repo, what).
				WithHint("close that window, then open it with the agent: `tamq open --mode trigger --command claude %s`", w.Repo)
		}
	}
	return nil
}

func (s *Service) send(ctx context.Context, peer unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.SendArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	sender, kind, err := s.senderOf(ctx, peer, args.Operator)
	if err != nil {
		return nil, err
	}
	reg, err := s.opts.Addresses() // every address check sees the current registry
	if err != nil {
		return nil, err
	}
	target, body, err := queue.ParseAddress(args.Text, reg.Slugs())
	if errs.Is(err, errs.UnknownTarget) {
		// The registry's own error names near matches.
		if _, rerr := reg.Resolve(queue.AddressedSlug(args.Text)); rerr != nil {
			err = rerr
		}
		s.rejected(ctx, queue.AddressedSlug(args.Text), sender, kind, err)
	}
	if err != nil {
		return nil, err
	}
	if body, err = queue.CleanBody(body); err != nil {
		s.rejected(ctx, target, sender, kind, err)
		return nil, err
	}
	mode := s.opts.Config.Coordination.DeliveryAckMode
	if args.AckMode != "" {
		if mode, err = ackmode.Parse(args.AckMode); err != nil {
			return nil, errs.New(errs.BadRequest, "ack mode %v", err)
		}
	}
	endpoints, err := s.knownEndpoints(ctx)
	if err != nil {
		return nil, err
	}
	epID, err := pickEndpoint(endpoints, target, args.EndpointID)
	if err != nil {
		return nil, err
	}
	m := &queue.Message{
		EndpointID: epID, Sender: sender, SenderKind: kind, Target: target, Body: body, AckMode: mode,
		MaxAttempts:   s.opts.Config.Coordination.MaxAttempts,
		PolicyProfile: s.opts.Config.ProfileRef(), ConfigVersion: s.opts.Config.Version,
	}
	// A window that cannot take text now keeps the message waiting; it says why.
	m.LastError = s.live.waitReason(store.DeliveryKey(epID, target))
	if args.ObservedAt != nil {
		// A line a broker kept while the service was down is recorded as said
		// when it was said; a time from the future is not believed.
		if at := args.ObservedAt.UTC(); !at.IsZero() && at.Before(s.opts.Now()) {
			m.CreatedAt = at
		}
	}
	if err := s.enqueue(ctx, m); err != nil {
		return nil, err
	}
	s.wakeFor(m.EndpointID, m.Target)
	return api.MessageOf(*m, false), nil
}

// rejected records a refused message: who sent it and why, never its text.
func (s *Service) rejected(ctx context.Context, target, sender string, kind queue.SenderKind, cause error) {
	r := s.receipt(store.KindRejected, "rejected", string(errs.CodeOf(cause)), map[string]any{
		"target": target, "sender": sender, "sender_kind": string(kind),
	})
	if err := s.store.Receipts.AddReceipt(ctx, r); err != nil {
		s.log.Error("cannot record a refused message", "error", err.Error())
	}
}

// senderOf derives the sender from the connecting process, never from what
// it declares: a process running in a tamq window (the pane's own process or
// one of its descendants) speaks for that window's repo; any other process is
// the operator. Only a window's broker, the pane's own process, may pass on a
// line its operator typed, as the operator's (labelled with the window's repo).
func (s *Service) senderOf(ctx context.Context, peer unixrpc.Peer, operatorLine bool) (string, queue.SenderKind, error) {
	p, self, ok := s.paneOf(ctx, peer.PID)
	switch {
	case !ok:
		return OperatorLabel, queue.FromOperator, nil
	case operatorLine && !self:
		return "", "", errs.New(errs.PermissionDeny, "only the broker of %s's window may send a line its operator typed", p.repo)
	case operatorLine:
		return p.repo, queue.FromOperator, nil
	}
	return p.repo, queue.FromWorker, nil
}

// pickEndpoint resolves the one connected endpoint hosting target.
func pickEndpoint(endpoints []queue.Endpoint, target, want string) (string, error) {
	var hosts []string
	for _, ep := range endpoints {
		if ep.State != queue.Connected {
			continue
		}
		for _, w := range ep.Windows {
			if w.Repo == target {
				hosts = append(hosts, ep.ID)
			}
		}
	}
	if want != "" {
		for _, h := range hosts {
			if h == want {
				return h, nil
			}
		}
		return "", errs.New(errs.Unavailable, "endpoint %s does not host a connected window for %q", want, target)
	}
	switch len(hosts) {
	case 0:
		return "", errs.New(errs.Unavailable, "no connected endpoint has a window for %q", target).
			WithHint("open one with `tamq open %s`", target)
	case 1:
		return hosts[0], nil
	}
	return "", errs.New(errs.Conflict, "%q has windows on %d endpoints (%s)", target, len(hosts), strings.Join(hosts, ", ")).
		WithHint("name one with --endpoint")
}

func (s *Service) ack(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m, err := s.store.Deliveries.Transition(ctx, args.ID, "acknowledged", func(m *queue.Message) error {
		m.Ack(s.opts.Now())
		return nil
	})
	if err != nil {
		return nil, err
	}
	return api.MessageOf(m, false), nil
}

func (s *Service) retry(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	m, err := s.store.Deliveries.Transition(ctx, args.ID, "retry requested", func(m *queue.Message) error {
		return m.Retry(s.opts.Now())
	})
	if err != nil {
		return nil, err
	}
	// A message whose endpoint is gone moves to its replacement, if any.
	s.live.requestRebind()
	s.wake()
	return api.MessageOf(m, false), nil
}

func (s *Service) endpoints(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.EndpointsArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	eps, err := store.Endpoints(ctx, s.db.Reader, args.All)
	if err != nil {
		return nil, err
	}
	return api.EndpointsResult{Endpoints: status.Live(ctx, eps)}, nil
}

// forget marks an endpoint whose tmux server is gone as forgotten.
func (s *Service) forget(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.IDArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	n, err := s.store.Endpoints.Forget(ctx, args.ID)
	s.endpointsChanged()
	if err != nil {
		return nil, err
	}
	return api.ForgetResult{EndpointID: args.ID, FailedMessages: n}, nil
}

// timing is the state machine's view of the configuration.
func timing(c *config.Loaded) queue.Timing {
	return queue.Timing{
		AckTimeout: time.Duration(c.Coordination.WakeAckTimeoutSeconds) * time.Second,
		Backoff:    c.RetryBackoff,
	}
}
