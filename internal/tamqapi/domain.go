package tamqapi

import (
	"time"

	"github.com/tmux-amq/tamq/internal/queue"
)

// The mappings between the domain's types (package queue) and the wire's,
// one each way, all here: the domain knows nothing of the wire, and the wire
// types stay plain strings and numbers for every client.

// MessageOf is the wire form of a message; the body only when asked for.
func MessageOf(m queue.Message, withBody bool) Message {
	opt := func(t time.Time) *time.Time {
		if t.IsZero() {
			return nil
		}
		return &t
	}
	r := Message{
		ID: m.ID, BatchID: m.BatchID, EndpointID: m.EndpointID, Sender: m.Sender, SenderKind: string(m.SenderKind),
		Target: m.Target, AckMode: string(m.AckMode), State: string(m.State), Attempts: m.Attempts, MaxRetries: m.MaxRetries, MaxAttemptsV1: m.MaxRetries,
		PolicyProfile: m.PolicyProfile, ConfigVersion: m.ConfigVersion, CreatedAt: m.CreatedAt, UpdatedAt: m.UpdatedAt,
		NextAttemptAt: opt(m.NextAttemptAt), AckDeadlineAt: opt(m.AckDeadlineAt), InjectedAt: opt(m.InjectedAt),
		AckedAt: opt(m.AckedAt), FailedAt: opt(m.FailedAt), LastError: m.LastError,
		IdempotencyKey: m.IdempotencyKey, CorrelationID: m.CorrelationID,
		CoordinationEndpointID: m.CoordinationEndpointID, ReplayOf: m.ReplayOf,
	}
	if m.SenderKind == queue.FromOperator {
		r.Provenance = "o"
	}
	if withBody {
		b := m.Body
		r.Body = &b
	}
	return r
}

// EndpointOf is the wire form of a recorded endpoint. What is only known
// live (a window's Alive, Broker, Waiting, WaitReason) is the caller's to add.
func EndpointOf(ep queue.Endpoint) Endpoint {
	out := Endpoint{ID: ep.ID, TmuxSocket: ep.TmuxSocket, ServerPID: ep.ServerPID, Session: ep.Session,
		State: string(ep.State), Forgotten: ep.Forgotten, Windows: make([]EndpointWindow, len(ep.Windows))}
	for i, w := range ep.Windows {
		out.Windows[i] = EndpointWindow{Repo: w.Repo, RepoPath: w.RepoPath, WindowID: w.WindowID, PaneID: w.PaneID,
			Mode: string(w.Mode), Command: w.Command, Reused: w.Reused}
		out.Windows[i].SetEnd(w.Ended, w.ExitStatus)
	}
	return out
}

// SetEnd records how the window's agent ended ("" : it runs), with its exit
// status (-1: not known).
func (w *EndpointWindow) SetEnd(end queue.AgentEnd, exitStatus int) {
	w.Ended, w.ExitStatus = string(end), nil
	if end == queue.AgentExited && exitStatus >= 0 {
		w.ExitStatus = &exitStatus
	}
}

// EndText says how the window's agent ended, in words ("" while it runs).
func (w EndpointWindow) EndText() string {
	status := -1
	if w.ExitStatus != nil {
		status = *w.ExitStatus
	}
	return queue.Window{Ended: queue.AgentEnd(w.Ended), ExitStatus: status}.EndText()
}

// Domain is the endpoint a registration describes. The live fields are
// dropped: they are never recorded.
func (ep Endpoint) Domain() queue.Endpoint {
	out := queue.Endpoint{ID: ep.ID, TmuxSocket: ep.TmuxSocket, ServerPID: ep.ServerPID, Session: ep.Session,
		State: queue.EndpointState(ep.State), Forgotten: ep.Forgotten, Windows: make([]queue.Window, len(ep.Windows))}
	for i, w := range ep.Windows {
		out.Windows[i] = queue.Window{Repo: w.Repo, RepoPath: w.RepoPath, WindowID: w.WindowID, PaneID: w.PaneID,
			Mode: queue.WindowMode(w.Mode), Command: w.Command, Reused: w.Reused}
	}
	return out
}
