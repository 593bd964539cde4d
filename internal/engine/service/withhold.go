package service

import (
	"log/slog"

	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/secretscan"
)

// What an agent hands the engine (a release reason, a checkpoint) goes into
// its database, its receipts and State Hub's progress, and a checkpoint
// comes back in the next attempt's prompt. Text the secret scan hits is
// replaced by api.WithheldText before any of that: the command still does
// what it was asked, and its answer names the field and the rule (never
// the text), so the agent is told.

// withhold replaces *text with api.WithheldText when it looks like it
// holds a secret, and says so.
func withhold(field string, text *string) []api.Withheld {
	f, hit := secretscan.Scan(*text)
	if !hit {
		return nil
	}
	*text = api.WithheldText
	return []api.Withheld{{Field: field, Rule: f.Rule, Offset: f.Offset}}
}

// withholdCheckpoint does withhold on each text of a checkpoint: its
// summary, next action and changed files (in place).
func withholdCheckpoint(summary, next *string, files []string) []api.Withheld {
	w := append(withhold("summary", summary), withhold("next_action", next)...)
	for i := range files {
		w = append(w, withhold("files_changed", &files[i])...)
	}
	return w
}

// logWithheld records what was withheld from an agent's request: the field
// and the rule, never the text.
func logWithheld(log *slog.Logger, leaseID string, w []api.Withheld) {
	for _, x := range w {
		log.Warn("text withheld: it looks like a secret", "lease", leaseID, "field", x.Field, "rule", x.Rule)
	}
}
