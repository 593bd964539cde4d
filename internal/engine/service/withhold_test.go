package service_test

import (
	"encoding/json"
	"net/http"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/engine/enginetest"
	api "github.com/tmux-amq/tamq/internal/engineapi"
	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/testutil"
)

// What an agent hands the engine is scanned before it is kept: a
// checkpoint (its summary, next action, files, from the command or posted
// to State Hub) and a release reason holding secret-looking text are kept,
// published and put in the next prompt as "withheld (secret-looking
// text)"; the commands succeed (exit 0), and stderr and the JSON answer
// name the field and the rule, never the text. The canaries are in no
// receipt, State Hub progress, database, log or terminal.
func TestReleaseAndCheckpointWithholdSecrets(t *testing.T) {
	t.Parallel()
	h := enginetest.StartHub(t, "")
	l := newLoop(t, enginetest.HubConfig(h, 1, "wake_ack_timeout_seconds = 30\nlease_renew_interval_seconds = 60\nretry_backoff_seconds = [1]\n"), "net-kingdom")
	l.agents(t, "ackstall", "net-kingdom")
	h.Put(enginetest.Workplan("W", "net-kingdom", enginetest.Todo("A", "net-kingdom")))
	var id string
	testutil.WaitFor(t, "A's lease checkpointed by its agent", func() bool {
		x := l.Explain(t, "A")
		if len(x.Triggers) != 1 || len(x.Triggers[0].Leases) != 1 {
			return false
		}
		id = x.Triggers[0].Leases[0].LeaseID
		return x.Triggers[0].Leases[0].State == "checkpointed"
	})

	// The canaries are put together here, so no file holds them whole.
	ghToken := "ghp_" + "q8Zr2LmX9vB4nT7kP1sW5yc3Hd6Jf0GuE4a2"
	awsKey := "AKIA" + "Q7WX2MZ4K3TR5VYP"
	password := "Tr0ub4dor" + "&3xyz"
	hubToken := "glpat-" + "q8Zr2LmX9vB4nT7kP1sW"
	canaries := []string{ghToken, awsKey, password, hubToken}

	r := l.Env.Run(t, "coordination-engine", "checkpoint", "--lease", id, "--attempt", "1",
		"--summary", "parser done; the CI uses "+ghToken, "--next", "log in with password is "+password,
		"--file", "internal/auth/token.go", "--json")
	var cp api.Lease
	if err := json.Unmarshal([]byte(r.Stdout), &cp); r.Status != 0 || err != nil {
		t.Fatalf("checkpoint: %s (%v)", r, err)
	}
	if len(cp.Withheld) != 2 || cp.Withheld[0].Field != "summary" || cp.Withheld[0].Rule != "github-pat" ||
		cp.Withheld[1].Field != "next_action" || cp.Withheld[1].Rule != "secret-assignment" {
		t.Errorf("checkpoint's withheld: %+v", cp.Withheld)
	}
	if !strings.Contains(r.Stderr, "the summary was withheld: it looks like it holds a secret (github-pat at byte 25)") ||
		!strings.Contains(r.Stderr, `kept and published "withheld (secret-looking text)" instead`) {
		t.Errorf("checkpoint's stderr does not say what was withheld:\n%s", r.Stderr)
	}

	// A checkpoint posted to State Hub is withheld the same way.
	status, b := h.Do(http.MethodPost, "/v1/checkpoints", contract.Checkpoint{Repo: "net-kingdom", LeaseID: id, TaskID: "A",
		Summary: "posted with " + hubToken, NextAction: "finish"})
	if status != http.StatusOK {
		t.Fatalf("post checkpoint: %d %s", status, b)
	}
	testutil.WaitFor(t, "the State Hub checkpoint on the lease", func() bool {
		n := 0
		for _, rc := range l.receipts(t, id) {
			if rc.Kind == "checkpoint.recorded" {
				n++
			}
		}
		return n == 3 // the agent's, the command's, State Hub's
	})

	r = l.Env.Run(t, "coordination-engine", "lease", "release", id, "--attempt", "1", "--result", "failed",
		"--reason", "need password="+password+" and "+awsKey)
	if r.Status != 0 || !strings.Contains(r.Stdout, "lease "+id+" released") ||
		!strings.Contains(r.Stderr, "the reason was withheld: it looks like it holds a secret (secret-assignment at byte 5)") {
		t.Errorf("release: %s", r)
	}
	for _, rc := range l.receipts(t, id) {
		if rc.Kind == "lease.retry_wait" || rc.Kind == "lease.failed" {
			if !strings.Contains(rc.Reason, api.WithheldText) {
				t.Errorf("the release's receipt does not say the reason was withheld: %+v", rc)
			}
		}
	}

	// The next attempt's prompt carries the checkpoint as withheld: the
	// wake goes out instead of stopping at the secret gate.
	testutil.WaitFor(t, "the second attempt's wake", func() bool {
		ls := l.lease(t, id)
		return ls.Attempt == 2 && ls.LocalLeaseID != ""
	})
	m := l.tamqMessage(t, l.lease(t, id).LocalLeaseID)
	if m.Body == nil || !strings.Contains(*m.Body, "from your latest checkpoint") || !strings.Contains(*m.Body, api.WithheldText) {
		t.Errorf("the second prompt does not carry the withheld checkpoint: %v", m.Body)
	}

	l.waitPublished(t, h)
	if _, progress := h.Progress(); !strings.Contains(progress, api.WithheldText) {
		t.Errorf("State Hub's progress does not say what was withheld:\n%s", progress)
	}
	l.noCanaries(t, h, "net-kingdom", canaries...)
}
