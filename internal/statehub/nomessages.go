package statehub

import (
	"context"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// NoMessages is the part of a Hub a tracker without coordination messages
// or checkpoints of its own answers (GitHub Issues, beads): no unread
// messages, none to show or mark read (errs.Unsupported), no checkpoints.
// A driver embeds it with the tracker's name.
type NoMessages struct {
	// Tracker names the tracker in the refusal ("GitHub Issues").
	Tracker string
}

// UnreadMessages: the tracker has no coordination messages.
func (n NoMessages) UnreadMessages(context.Context) ([]contract.Message, []Invalid, error) {
	return nil, nil, nil
}

// Message is unsupported: the tracker has no coordination messages.
func (n NoMessages) Message(context.Context, string) (contract.MessageWithBody, error) {
	return contract.MessageWithBody{}, n.refusal()
}

// MarkRead is unsupported: the tracker has no coordination messages.
func (n NoMessages) MarkRead(context.Context, string) error { return n.refusal() }

func (n NoMessages) refusal() error {
	return errs.New(errs.Unsupported, "%s has no coordination messages", n.Tracker).
		WithHint("agents talk through tamq (`To:<repo>:`)")
}

// Checkpoints: the tracker keeps none; agents hand them to the engine
// (`coordination-engine checkpoint`).
func (n NoMessages) Checkpoints(_ context.Context, cursor string) ([]contract.Checkpoint, string, []Invalid, error) {
	return nil, cursor, nil, nil
}
