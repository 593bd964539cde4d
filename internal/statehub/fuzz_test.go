package statehub

import (
	"bytes"
	"encoding/json"
	"slices"
	"testing"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/engine/observe"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/lease"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// FuzzAnswers serves arbitrary bytes as State Hub's answer to each of the
// client's reads (workplans, unread messages, checkpoints) and judges the
// workplans kept, as the engine's observer does. Nothing panics; every
// object is either kept or skipped with a reason; what is kept has what the
// contract requires; and every candidate the observation makes either
// passes lease.Trigger.Check or fails it with bad_request, which the
// observer reports as an invalid source object (and only for an id or repo
// of State Hub's that breaks the trigger's rules).
func FuzzAnswers(f *testing.F) {
	for _, body := range []string{
		`{"workplans":[{"id":"wp1","repo":"a","status":"active","revision":"1","tasks":[{"id":"T1","title":"x","status":"todo","revision":"r1","repo":"a","depends_on":[],"priority":1}]}]}`,
		`{"workplans":[{"id":"W1","repo":"net","status":"active","revision":"1","tasks":[{"id":"A","status":"done","revision":"r-A","repo":"net"}]},` +
			`{"id":"W2","repo":"rail","status":"ready","revision":"1","needs_human":true,"tasks":[{"id":"B","status":"todo","revision":"r-B","repo":"rail","depends_on":["A"]},` +
			`{"id":"C","status":"ready","revision":"r-C","repo":"rail","proposed_actions":[{"category":"destructive","summary":"rm"}]},` +
			`{"id":"E","status":"todo","revision":"r-E","repo":"rail","depends_on":["ghost"],"secrets_required":true}]}]}`,
		`{"workplans":[{"id":"W","repo":"r","status":"active","revision":"1","tasks":[{"id":"x","status":"todo","revision":"1","repo":"r","priority":3},{"id":"x","status":"todo","revision":"2","repo":"r"}]}]}`,
		`{"workplans":[{"id":"W","repo":"r","status":"active","revision":"1","tasks":[{"id":"t\u001b[2J","status":"todo","revision":"1","repo":"r"}]}]}`,
		`{"workplans":[{"id":"","repo":"r"},{"id":"W","repo":"r","status":"bogus","revision":"1"},7,null]}`,
		`{"messages":[{"id":"m1","revision":"1","to_repo":"net","from":"ops","subject":"please","requests_action":true,"created_at":"2026-01-02T03:04:05Z"},{"id":"m2"}]}`,
		`{"checkpoints":[{"id":"c1","repo":"net","lease_id":"L1","summary":"half done","next_action":"finish","recorded_at":"2026-01-02T03:04:05Z"},{"id":"c2","repo":"net"}],"cursor":"c1"}`,
		`{"workplans":{}}`, `[]`, `null`, ``, `{"workplans":[`,
	} {
		f.Add([]byte(body))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		var wraw struct {
			Workplans []json.RawMessage `json:"workplans"`
		}
		if decodeBody(bytes.NewReader(body), &wraw) == nil {
			wps, bad := decodeWorkplans(wraw.Workplans)
			if len(wps)+len(bad) != len(wraw.Workplans) {
				t.Fatalf("%d workplans: %d kept, %d skipped", len(wraw.Workplans), len(wps), len(bad))
			}
			for _, wp := range wps {
				if p := workplanProblem(wp); p != "" {
					t.Fatalf("kept workplan %s: %s", wp.ID, p)
				}
			}
			checkInvalid(t, bad)
			checkObservation(t, wps)
		}
		var mraw struct {
			Messages []json.RawMessage `json:"messages"`
		}
		if decodeBody(bytes.NewReader(body), &mraw) == nil {
			msgs, bad := decodeMessages(mraw.Messages)
			if len(msgs)+len(bad) != len(mraw.Messages) {
				t.Fatalf("%d messages: %d kept, %d skipped", len(mraw.Messages), len(msgs), len(bad))
			}
			for _, m := range msgs {
				if m.ID == "" || m.Revision == "" || m.ToRepo == "" {
					t.Fatalf("kept message %+v", m)
				}
			}
			checkInvalid(t, bad)
			for _, c := range observe.Messages(msgs) {
				checkCandidate(t, c.Trigger)
			}
		}
		var craw struct {
			Checkpoints []json.RawMessage `json:"checkpoints"`
			Cursor      string            `json:"cursor"`
		}
		if decodeBody(bytes.NewReader(body), &craw) == nil {
			cps, bad := decodeCheckpoints(craw.Checkpoints)
			if len(cps)+len(bad) != len(craw.Checkpoints) {
				t.Fatalf("%d checkpoints: %d kept, %d skipped", len(craw.Checkpoints), len(cps), len(bad))
			}
			for _, cp := range cps {
				if cp.ID == "" || cp.Repo == "" || cp.Summary == "" {
					t.Fatalf("kept checkpoint %+v", cp)
				}
			}
			checkInvalid(t, bad)
		}
	})
}

func checkInvalid(t *testing.T, bad []Invalid) {
	t.Helper()
	for _, b := range bad {
		if b.Kind == "" || b.Reason == "" {
			t.Fatalf("skipped without saying why: %+v", b)
		}
	}
}

// anyPolicy knows every category but "orbit" and sends "destructive" to a
// human, as a profile might.
type anyPolicy struct{}

func (anyPolicy) Known(c string) bool         { return c != "orbit" }
func (anyPolicy) RequiresHuman(c string) bool { return c == "destructive" }

func checkObservation(t *testing.T, wps []contract.Workplan) {
	t.Helper()
	obs := observe.Tasks(wps, nil, anyPolicy{})
	for i, c := range obs.Candidates {
		v, ok := obs.Tasks[c.Trigger.SourceID]
		if !ok || !v.Actionable || v.Waiting != "" || v.Gate != c.Gate {
			t.Fatalf("candidate %s: task %+v", c.Trigger.SourceID, v)
		}
		if i > 0 {
			prev := obs.Candidates[i-1]
			if prev.Priority > c.Priority || prev.Priority == c.Priority && prev.Trigger.SourceID >= c.Trigger.SourceID {
				t.Fatalf("candidates out of order: %s before %s", prev.Trigger.SourceID, c.Trigger.SourceID)
			}
		}
		if len(c.Trigger.Title) > observe.MaxTitle || !utf8.ValidString(c.Trigger.Title) {
			t.Fatalf("title of %d bytes kept", len(c.Trigger.Title))
		}
		checkCandidate(t, c.Trigger)
	}
	// Every task's gates are judged (a lease's next attempt is judged by
	// them too); a task is actionable exactly when nothing makes it wait.
	for id, v := range obs.Tasks {
		if v.Actionable != (v.Waiting == "") {
			t.Fatalf("task %s: %+v", id, v)
		}
	}
}

// checkCandidate: a trigger the observation made is well formed (a known
// source and reason), and when Check refuses it, it is for State Hub's data
// (an id, revision or repo too long or not plain text), as bad_request.
func checkCandidate(t *testing.T, tr lease.Trigger) {
	t.Helper()
	if !slices.Contains(lease.Sources, tr.Source) || !slices.Contains(lease.Reasons, tr.Reason) {
		t.Fatalf("trigger of source %q, reason %q", tr.Source, tr.Reason)
	}
	err := tr.Check()
	plain := true
	for _, s := range []string{tr.SourceID, tr.SourceRevision, tr.TargetRepo, tr.TargetAgent, tr.TaskID, tr.WorkplanID, tr.Sender} {
		plain = plain && plainID(s)
	}
	switch {
	case err != nil && !errs.Is(err, errs.BadRequest):
		t.Fatalf("trigger refused with %s, not reported as invalid: %v", errs.CodeOf(err), err)
	case err != nil && plain && tr.SourceID != "" && tr.SourceRevision != "" && tr.TargetRepo != "":
		t.Fatalf("trigger of plain ids refused: %v", err)
	}
}

// plainID is short text without control characters, as lease.Trigger.Check
// wants its ids.
func plainID(s string) bool {
	if len(s) > lease.MaxID || !utf8.ValidString(s) {
		return false
	}
	for _, r := range s {
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return false
		}
	}
	return true
}
