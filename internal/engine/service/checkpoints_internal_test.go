package service

import (
	"encoding/json"
	"strings"
	"testing"

	api "github.com/tmux-amq/tamq/internal/engineapi"
)

// A checkpoint at its limits is larger than a frame: its listing leaves
// out files at the end, saying how many, so every page holds one; a small
// one is listed whole.
func TestACheckpointFitsHalfAFrame(t *testing.T) {
	t.Parallel()
	files := make([]string, 100)
	for i := range files {
		files[i] = strings.Repeat("f", 1<<10)
	}
	big := api.Checkpoint{LeaseID: "L", Summary: strings.Repeat("s\n", 2<<10), NextAction: strings.Repeat("n", 4<<10), FilesChanged: files}
	got := fitCheckpoint(big)
	b, _ := json.Marshal(got)
	if len(b) > frameBudget/2 || got.FilesOmitted == 0 || len(got.FilesChanged)+got.FilesOmitted != 100 || got.Summary != big.Summary {
		t.Errorf("the largest checkpoint takes %d bytes of %d, %d files listed and %d left out", len(b), frameBudget/2, len(got.FilesChanged), got.FilesOmitted)
	}
	small := api.Checkpoint{LeaseID: "L", Summary: "done", FilesChanged: []string{"a.go"}}
	if got := fitCheckpoint(small); got.FilesOmitted != 0 || len(got.FilesChanged) != 1 {
		t.Errorf("a small checkpoint was cut: %+v", got)
	}
}
