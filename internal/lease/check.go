package lease

import (
	"fmt"
	"slices"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Limits of a checkpoint, in bytes of UTF-8 and entries. The summary, next
// action and file list go into the next wake's prompt, so they are kept to
// what a prompt can carry.
const (
	MaxSummary    = 4 << 10
	MaxNextAction = 4 << 10
	MaxFiles      = 100
	MaxFileName   = 1 << 10
	MaxID         = 200 // a task id, source id or revision
)

// Check holds a checkpoint to its rules: a summary (not empty, at most 4
// KiB), at most 100 changed files, a blocked reason of the list or none, and
// text fields that are UTF-8 without control characters (newlines and tabs
// are allowed in the summary and next action), since they will be typed into
// a terminal as part of a prompt.
func (c Checkpoint) Check() error {
	if err := checkText("summary", c.Summary, MaxSummary, true); err != nil {
		return err
	}
	if !hasText(c.Summary) {
		return errs.New(errs.BadRequest, "a checkpoint needs a summary")
	}
	if err := checkText("next action", c.NextAction, MaxNextAction, true); err != nil {
		return err
	}
	if err := checkText("task id", c.TaskID, MaxID, false); err != nil {
		return err
	}
	if len(c.FilesChanged) > MaxFiles {
		return errs.New(errs.BadRequest, "a checkpoint lists %d changed files; the limit is %d", len(c.FilesChanged), MaxFiles)
	}
	for i, f := range c.FilesChanged {
		if err := checkText(fmt.Sprintf("changed file %d", i+1), f, MaxFileName, false); err != nil {
			return err
		}
		if f == "" {
			return errs.New(errs.BadRequest, "changed file %d is empty", i+1)
		}
	}
	if c.BlockedReason != "" && !slices.Contains(BlockedReasons, c.BlockedReason) {
		return errs.New(errs.BadRequest, "unknown blocked reason %q; want human, secret, destructive, policy, dependency or unavailable", c.BlockedReason)
	}
	return nil
}

// Check holds a trigger to its rules: a known source and reason, and the
// parts of its key present and short.
func (tr Trigger) Check() error {
	if !slices.Contains(Sources, tr.Source) {
		return errs.New(errs.BadRequest, "unknown trigger source %q", tr.Source)
	}
	if !slices.Contains(Reasons, tr.Reason) {
		return errs.New(errs.BadRequest, "unknown trigger reason %q", tr.Reason)
	}
	for _, f := range []struct{ name, value string }{
		{"source id", tr.SourceID}, {"source revision", tr.SourceRevision}, {"target repo", tr.TargetRepo},
	} {
		if f.value == "" {
			return errs.New(errs.BadRequest, "a trigger needs a %s", f.name)
		}
	}
	for _, f := range []struct{ name, value string }{
		{"source id", tr.SourceID}, {"source revision", tr.SourceRevision}, {"target repo", tr.TargetRepo},
		{"target agent", tr.TargetAgent}, {"task id", tr.TaskID}, {"workplan id", tr.WorkplanID}, {"sender", tr.Sender},
	} {
		if err := checkText(f.name, f.value, MaxID, false); err != nil {
			return err
		}
	}
	return nil
}

// checkText refuses text over limit bytes, invalid UTF-8, and control
// characters (C0, DEL, C1); multiline allows newlines and tabs.
func checkText(field, s string, limit int, multiline bool) error {
	if len(s) > limit {
		return errs.New(errs.BadRequest, "the %s is %d bytes; the limit is %d", field, len(s), limit)
	}
	if !utf8.ValidString(s) {
		return errs.New(errs.BadRequest, "the %s is not valid UTF-8", field)
	}
	for i, r := range s {
		if multiline && (r == '\n' || r == '\t') {
			continue
		}
		if r < 0x20 || r == 0x7f || (r >= 0x80 && r < 0xa0) {
			return errs.New(errs.BadRequest, "the %s has control character 0x%02x at offset %d", field, r, i)
		}
	}
	return nil
}

// hasText reports whether s has anything but spaces, tabs and newlines.
func hasText(s string) bool {
	for _, r := range s {
		if r != ' ' && r != '\t' && r != '\n' {
			return true
		}
	}
	return false
}
