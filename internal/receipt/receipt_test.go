package receipt

import (
	"strings"
	"testing"
	"time"
)

func TestSanitizeKeepsMetadataOnly(t *testing.T) {
	in := map[string]any{
		"message_id": "m1", "attempt": 2, "ok": true, "ratio": 0.5,
		"body": "secret plans", "Prompt": "x", "auth_token": "t", "terminal_output": "y", "payload_size": 3,
		"nested": map[string]any{"a": 1}, "list": []string{"a"},
		"reason": "bad\x1b[31m\nline", "long": strings.Repeat("é", 300),
	}
	out := Sanitize(in)
	for _, k := range []string{"body", "Prompt", "auth_token", "terminal_output", "payload_size", "nested", "list"} {
		if _, ok := out[k]; ok {
			t.Errorf("%s kept", k)
		}
	}
	if out["message_id"] != "m1" || out["attempt"] != 2 || out["ok"] != true || out["ratio"] != 0.5 {
		t.Errorf("metadata lost: %v", out)
	}
	if out["reason"] != "bad[31mline" {
		t.Errorf("control characters kept: %q", out["reason"])
	}
	long := out["long"].(string)
	if len(long) > maxValue+len("…") || !strings.HasSuffix(long, "…") || !strings.HasPrefix(long, "é") {
		t.Errorf("long value %q", long)
	}
	for _, r := range long {
		if r == '\uFFFD' {
			t.Fatal("cut inside a UTF-8 sequence")
		}
	}
}

// Stamp fills only what the receipt lacks: a receipt written with its own
// time, profile or version keeps them.
func TestStampFillsOnlyWhatIsMissing(t *testing.T) {
	now := time.UnixMilli(1_000).UTC()
	var r Receipt
	r.Stamp(now, "default@1", "c1")
	if !r.At.Equal(now) || r.PolicyProfile != "default@1" || r.ConfigVersion != "c1" {
		t.Errorf("an empty receipt stamped: %+v", r)
	}
	own := Receipt{At: now.Add(time.Hour), PolicyProfile: "strict@2", ConfigVersion: "c0"}
	own.Stamp(now, "default@1", "c1")
	if !own.At.Equal(now.Add(time.Hour)) || own.PolicyProfile != "strict@2" || own.ConfigVersion != "c0" {
		t.Errorf("a receipt with its own values stamped: %+v", own)
	}
}
