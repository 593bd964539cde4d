package service

import (
	"context"
	"fmt"
	"log/slog"
	"path/filepath"

	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/engine/store"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
	"github.com/tmux-amq/tamq/internal/wakeup"
)

// attachHandlers answer tamq's service: its endpoint attached and
// detached, and its receipts published with the engine's credentials.
type attachHandlers struct {
	store    *store.Store
	log      *slog.Logger
	registry func() (*gita.Registry, error)
	hub      statehub.Hub
	// When the windows change the routes flag is raised and the observer
	// and the waker woken: the work waiting for a window is judged, and
	// the wakes waiting are sent.
	routes                *routesFlag
	lookNow, wakesPending wakeup.Signal
}

func (ah *attachHandlers) ops() ops {
	return ops{
		api.OpAttach:  {door.TamqOnly, ah.attach},
		api.OpDetach:  {door.TamqOnly, ah.detach},
		api.OpPublish: {door.TamqOnly, ah.publish},
	}
}

// attach is tamq's handshake (spec section 5): the engine reads the gita
// registry afresh and accepts only windows whose slug gita registers and
// whose path is gita's; the others are refused with a receipt and never
// registered. The endpoint gets its coordination endpoint id (the same one
// when the same tamq endpoint attaches again).
func (ah *attachHandlers) attach(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.AttachArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := checkEndpointID(args.EndpointID); err != nil {
		return nil, err
	}
	proto, err := unixrpc.Negotiate(unixrpc.Version, args.Proto)
	if err != nil {
		return nil, err
	}
	if len(args.Windows) > 1000 {
		return nil, errs.New(errs.BadRequest, "attach lists %d windows; at most 1000", len(args.Windows))
	}
	reg, err := ah.registry()
	if err != nil {
		return nil, err
	}
	ep := lease.Endpoint{
		TamqEndpointID: args.EndpointID, TmuxSession: args.TmuxSession, TmuxSocket: args.TmuxSocket,
		Proto: proto, Capabilities: args.Capabilities, State: lease.Attached,
	}
	var refused []store.Refusal
	for _, w := range args.Windows {
		if reason := windowProblem(reg, w); reason != "" {
			refused = append(refused, store.Refusal{Repo: textsafe.Escape(w.Repo), Reason: reason})
			continue
		}
		ep.Windows = append(ep.Windows, lease.Window{Repo: w.Repo, Path: w.Path, Command: w.Command, Mode: lease.WindowMode(w.Mode),
			NoAgent: w.AgentRunning != nil && !*w.AgentRunning})
	}
	got, err := ah.store.Endpoints.Attach(ctx, ep, refused)
	if err != nil {
		return nil, err
	}
	ah.log.Info("tamq endpoint attached", "endpoint", args.EndpointID, "coordination_endpoint_id", got.ID,
		"windows", len(ep.Windows), "refused", len(refused))
	res := api.AttachResult{
		CoordinationEndpointID: got.ID, Proto: proto, Capabilities: []string{api.CapLeases, api.CapReceipts},
		Accepted: []string{},
	}
	for _, w := range ep.Windows {
		res.Accepted = append(res.Accepted, w.Repo)
	}
	for _, r := range refused {
		res.Refused = append(res.Refused, api.AttachRefusal{Repo: r.Repo, Reason: r.Reason})
	}
	ah.routes.Changed()
	ah.wakesPending.Wake() // leases waiting for this endpoint may go now
	ah.lookNow.Wake()      // and work waiting for a window: judged at once, not at the next poll
	return res, nil
}

// windowProblem says why a window cannot be registered, or "".
func windowProblem(reg *gita.Registry, w api.AttachWindow) string {
	if problem := textsafe.NameProblem(w.Repo); problem != "" {
		return "not a repo slug: " + problem
	}
	if w.Mode != api.ModeTrigger && w.Mode != api.ModeManual {
		return fmt.Sprintf("unknown mode %q", textsafe.Escape(w.Mode))
	}
	r, ok := reg.Lookup(w.Repo)
	if !ok {
		return "not registered in gita"
	}
	if !samePath(w.Path, r.Path) {
		return "the window's path is not the path gita registers for the repo"
	}
	return ""
}

// samePath compares two directories as the file system sees them.
func samePath(a, b string) bool {
	if a == "" || b == "" {
		return false
	}
	if filepath.Clean(a) == filepath.Clean(b) {
		return true
	}
	ra, errA := filepath.EvalSymlinks(a)
	rb, errB := filepath.EvalSymlinks(b)
	return errA == nil && errB == nil && ra == rb
}

func checkEndpointID(id string) error {
	if id == "" || len(id) > 128 || textsafe.NameProblem(id) != "" {
		return errs.New(errs.BadRequest, "endpoint id %q is not a tamq endpoint id", textsafe.Escape(id))
	}
	return nil
}

// detach marks a tamq endpoint detached: nothing is woken through it until
// it attaches again.
func (ah *attachHandlers) detach(ctx context.Context, _ unixrpc.Peer, req *unixrpc.Request) (any, error) {
	var args api.DetachArgs
	if err := unixrpc.DecodeArgs(req, &args); err != nil {
		return nil, err
	}
	if err := checkEndpointID(args.EndpointID); err != nil {
		return nil, err
	}
	reason := args.Reason
	if reason == "" {
		reason = "tamq detached"
	}
	ah.routes.Changed()
	return nil, ah.store.Endpoints.Detach(ctx, args.EndpointID, textsafe.Escape(reason))
}
