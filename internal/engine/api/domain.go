package api

import (
	"time"

	"github.com/tmux-amq/tamq/internal/engine/lease"
)

// TriggerOf is the wire form of a trigger.
func TriggerOf(t lease.Trigger) Trigger {
	return Trigger{
		ID: t.ID, Source: string(t.Source), SourceID: t.SourceID, SourceRevision: t.SourceRevision,
		TargetRepo: t.TargetRepo, TargetAgent: t.TargetAgent, Reason: string(t.Reason), State: string(t.State),
		GateReason: t.GateReason, TaskID: t.TaskID, WorkplanID: t.WorkplanID, GateChecks: t.GateChecks,
		NextCheckAt: optional(t.NextCheckAt), ObservedAt: t.ObservedAt.UTC(),
	}
}

// LeaseOf is the wire form of a lease. MaxAttempts counts every attempt the
// lease may have (the first and its retries), as the prompt says "attempt 2
// of 5".
func LeaseOf(l lease.Lease) Lease {
	return Lease{
		LeaseID: l.ID, TriggerID: l.TriggerID, Owner: l.Owner, TargetRepo: l.TargetRepo, TargetAgent: l.TargetAgent,
		State: string(l.State), Attempt: l.Attempt, MaxAttempts: l.MaxAttempts + 1,
		AcquiredAt: l.AcquiredAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
		NextRetryAt: optional(l.NextRetryAt), LastCheckpointAt: optional(l.LastCheckpointAt),
		CoordinationEndpointID: l.CoordinationEndpointID, LocalLeaseID: l.LocalLeaseID,
		WakeOutcome: string(l.WakeOutcome), StopReason: l.StopReason,
		PolicyProfile: l.PolicyProfile, ConfigVersion: l.ConfigVersion, UpdatedAt: l.UpdatedAt.UTC(),
	}
}

// EndpointStatusOf is the wire form of an attached (or detached) endpoint.
func EndpointStatusOf(e lease.Endpoint) EndpointStatus {
	out := EndpointStatus{
		CoordinationEndpointID: e.ID, TamqEndpointID: e.TamqEndpointID, TmuxSession: e.TmuxSession, TmuxSocket: e.TmuxSocket,
		State: string(e.State), Proto: e.Proto, Capabilities: e.Capabilities, AttachedAt: e.AttachedAt.UTC(),
		Windows: []AttachWindow{},
	}
	if out.Capabilities == nil {
		out.Capabilities = []string{}
	}
	for _, w := range e.Windows {
		out.Windows = append(out.Windows, AttachWindow{Repo: w.Repo, Path: w.Path, Command: w.Command, Mode: string(w.Mode)})
	}
	return out
}

func optional(t time.Time) *time.Time {
	if t.IsZero() {
		return nil
	}
	u := t.UTC()
	return &u
}
