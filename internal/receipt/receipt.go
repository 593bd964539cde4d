// Package receipt is the model of the sanitized audit receipts both programs
// write for every transition (spec section 7): identifiers, states, reasons,
// timestamps and counts, never message bodies, prompts, credentials or
// terminal output.
package receipt

import (
	"strings"
	"time"
	"unicode"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Receipt is one audit record, the one model both programs write: what a
// program writes, and what it reads back (then ID is the store's row id).
// Each program fills the ids of what it is about and leaves the others
// empty: tamq the message or endpoint (SubjectID, EndpointID),
// coordination-engine the trigger, lease and wake message (TriggerID,
// LeaseID, LocalMessageID). Zero times are unset. Its JSON is the engine's
// receipts listing (engineapi.Receipt); State Hub receives another form,
// contract.Receipt, whose id must stay the same across restarts and which
// names the program and host that wrote it.
type Receipt struct {
	ID                     int64          `json:"id"`
	At                     time.Time      `json:"at"`
	Kind                   string         `json:"kind"`                 // e.g. "service.start", "message.transition"
	SubjectID              string         `json:"subject_id,omitempty"` // tamq: the message, endpoint or other id it is about
	TriggerID              string         `json:"trigger_id,omitempty"` // coordination-engine: the trigger it is about
	LeaseID                string         `json:"lease_id,omitempty"`   // coordination-engine: the lease it is about
	Status                 string         `json:"status"`
	Reason                 string         `json:"reason,omitempty"`
	Attempt                int            `json:"attempt,omitempty"` // 0 when not applicable
	NextRetryAt            time.Time      `json:"next_retry_at,omitzero"`
	EndpointID             string         `json:"endpoint_id,omitempty"`
	CoordinationEndpointID string         `json:"coordination_endpoint_id,omitempty"`
	LocalMessageID         string         `json:"local_message_id,omitempty"` // tamq's message id of a wake
	PolicyProfile          string         `json:"policy_profile,omitempty"`   // name@version
	ConfigVersion          string         `json:"config_version,omitempty"`
	Detail                 map[string]any `json:"detail,omitempty"`
	ProjectedAt            time.Time      `json:"projected_at,omitzero"` // when it was published to State Hub (read back)
	// TaskID and Repo, read back by coordination-engine, are the task and
	// repo it is about: of its trigger, else as its detail names them.
	// Never written: they follow from the trigger.
	TaskID string `json:"task_id,omitempty"`
	Repo   string `json:"repo,omitempty"`
}

// Stamp fills what a receipt written without its own gets: the time it is
// written and the policy profile and config version in force.
func (r *Receipt) Stamp(now time.Time, policyProfile, configVersion string) {
	if r.At.IsZero() {
		r.At = now
	}
	if r.PolicyProfile == "" {
		r.PolicyProfile = policyProfile
	}
	if r.ConfigVersion == "" {
		r.ConfigVersion = configVersion
	}
}

// Kinds written by tamq's service.
const (
	KindServiceStart    = "service.start"
	KindServiceShutdown = "service.shutdown"
	KindAuthRefused     = "auth.refused"
)

// forbidden are detail keys that could carry content rather than metadata.
var forbidden = []string{"body", "text", "prompt", "token", "secret", "password", "credential", "output", "payload", "key"}

// maxValue bounds a detail string: identifiers and reasons are short.
const maxValue = 200

// Sanitize returns a copy of detail safe to store and project: keys that name
// content are dropped, strings are stripped of control characters and cut
// short, and only strings, numbers and booleans are kept.
func Sanitize(detail map[string]any) map[string]any {
	out := map[string]any{}
	for k, v := range detail {
		if isForbidden(k) {
			continue
		}
		switch x := v.(type) {
		case string:
			out[k] = clean(x)
		case bool, int, int32, int64, uint32, uint64, float64:
			out[k] = x
		}
	}
	return out
}

func isForbidden(key string) bool {
	k := strings.ToLower(key)
	for _, f := range forbidden {
		if strings.Contains(k, f) {
			return true
		}
	}
	return false
}

func clean(s string) string {
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return -1
		}
		return r
	}, s)
	return textsafe.Cut(s, maxValue)
}
