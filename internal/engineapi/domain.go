package engineapi

import (
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/lease"
)

// TriggerOf is the wire form of a trigger.
func TriggerOf(t lease.Trigger) Trigger {
	return Trigger{
		ID: t.ID, Source: string(t.Source), SourceID: t.SourceID, SourceRevision: t.SourceRevision,
		TargetRepo: t.TargetRepo, TargetAgent: t.TargetAgent, Reason: string(t.Reason), State: string(t.State),
		GateReason: t.GateReason, TaskID: t.TaskID, WorkplanID: t.WorkplanID, GateChecks: t.GateChecks,
		NextCheckAt: optional(t.NextCheckAt), ObservedAt: t.ObservedAt.UTC(),
		Waiting: string(t.Wait), WaitingFor: t.WaitDetail, WokenBy: WokenBy(t),
	}
}

// OperatorRevision starts the revision of an operator's manual trigger
// (coordination-engine wake): each command is a revision of its own.
const OperatorRevision = "manual-"

// WokenBy says who asked for a trigger's wake: the operator, or State Hub.
func WokenBy(t lease.Trigger) string {
	if strings.HasPrefix(t.SourceRevision, OperatorRevision) {
		return "operator"
	}
	return "statehub"
}

// LeaseOf is the wire form of a lease. MaxAttempts counts every attempt the
// lease may have (the first and its retries), as the prompt says "attempt 2
// of 5".
func LeaseOf(l lease.Lease) Lease {
	return Lease{
		LeaseID: l.ID, TriggerID: l.TriggerID, Owner: l.Owner, TargetRepo: l.TargetRepo, TargetAgent: l.TargetAgent,
		State: string(l.State), Attempt: l.Attempt, MaxAttempts: l.Attempts(),
		AcquiredAt: l.AcquiredAt.UTC(), ExpiresAt: l.ExpiresAt.UTC(),
		NextRetryAt: optional(l.NextRetryAt), LastCheckpointAt: optional(l.LastCheckpointAt),
		CoordinationEndpointID: l.CoordinationEndpointID, LocalLeaseID: l.LocalLeaseID,
		WakeOutcome: string(l.WakeOutcome), StopReason: l.StopReason, Released: string(l.Released),
		PolicyProfile: l.PolicyProfile, ConfigVersion: l.ConfigVersion, UpdatedAt: l.UpdatedAt.UTC(),
		AckedBy: l.AckedBy, AckedAt: optional(l.AckedAt),
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
		running := !w.NoAgent
		out.Windows = append(out.Windows, AttachWindow{Repo: w.Repo, Path: w.Path, Command: w.Command, Mode: string(w.Mode), AgentRunning: &running})
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
