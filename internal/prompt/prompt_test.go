package prompt

import (
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

func input(cp *Checkpoint) Input {
	return Input{
		Program: "coordination-engine", LeaseID: "L-1", Attempt: 2, MaxAttempts: 5, Repo: "net-kingdom",
		Trigger:    Trigger{Source: "task", SourceID: "T-7", SourceRevision: "r3", Reason: "task_actionable"},
		Checkpoint: cp,
	}
}

func TestPromptEndsWithTheReleaseCommandAndFitsTheBodyLimit(t *testing.T) {
	huge := strings.Repeat("é", 10_000)
	for _, cp := range []*Checkpoint{
		nil,
		{Summary: "did half", NextAction: "do the rest", FilesChanged: []string{"a.go", "b.go"}, RecordedAt: time.Unix(100, 0)},
		{Summary: huge, NextAction: huge, FilesChanged: []string{huge, huge}, RecordedAt: time.Unix(100, 0)},
	} {
		p := Build(input(cp))
		if !strings.HasSuffix(p, "coordination-engine lease release L-1 --attempt 2 --result completed|failed|blocked [--reason TEXT]") {
			t.Errorf("the prompt does not end with the release command:\n%s", p[max(0, len(p)-200):])
		}
		if len(p) > MaxBytes || !utf8.ValidString(p) {
			t.Errorf("prompt of %d bytes (valid UTF-8: %v)", len(p), utf8.ValidString(p))
		}
		if p != Build(input(cp)) {
			t.Error("the same input gave another prompt")
		}
	}
}

func TestPromptCarriesTheCheckpointAndTheTemplatesInOrder(t *testing.T) {
	p := Build(input(&Checkpoint{Summary: "did\nhalf", NextAction: "do the rest", RecordedAt: time.Unix(100, 0)}))
	for _, want := range []string{"attempt 2 of 5", "did half", "do the rest", "task T-7, revision r3"} {
		if !strings.Contains(p, want) {
			t.Errorf("prompt lacks %q:\n%s", want, p)
		}
	}
	last := -1
	for _, tpl := range Templates {
		i := strings.Index(p, tpl)
		if i <= last {
			t.Errorf("template %q missing or out of order", tpl)
		}
		last = i
	}
	if strings.Contains(Build(input(nil)), "checkpoint (") {
		t.Error("a prompt without a checkpoint mentions one")
	}
}
