package devhub

import (
	"net/http"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// checkpointRoutes serves /v1/checkpoints: those after a cursor, and a new one.
type checkpointRoutes struct{ *Server }

// getCheckpoints lists the checkpoints after the cursor, which is the count
// already seen.
func (s checkpointRoutes) getCheckpoints(w http.ResponseWriter, r *http.Request) {
	since := 0
	if c := r.URL.Query().Get("since"); c != "" {
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 {
			fail(w, http.StatusBadRequest, "cursor %q is not one this server gave", textsafe.Escape(c))
			return
		}
		since = n
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	since = min(since, len(s.doc.Checkpoints))
	out := append([]contract.Checkpoint{}, s.doc.Checkpoints[since:]...)
	reply(w, map[string]any{"checkpoints": out, "cursor": strconv.Itoa(len(s.doc.Checkpoints))})
}

func (s checkpointRoutes) postCheckpoint(w http.ResponseWriter, r *http.Request) {
	var c contract.Checkpoint
	if !decode(w, r, &c) {
		return
	}
	for what, v := range map[string]string{"repo": c.Repo, "lease_id": c.LeaseID} {
		if err := checkID(what, v); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	if strings.TrimSpace(c.Summary) == "" {
		fail(w, http.StatusBadRequest, "a checkpoint needs a summary")
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if !s.room(w, jsonSize(c)) {
		return
	}
	c.ID = "c" + strconv.Itoa(len(s.doc.Checkpoints)+1)
	if c.RecordedAt.IsZero() {
		c.RecordedAt = s.Now()
	}
	s.doc.Checkpoints = append(s.doc.Checkpoints, c)
	if s.commit(w, "checkpoint", c.ID) {
		reply(w, c)
	}
}
