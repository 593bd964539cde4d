package devhub

import (
	"encoding/json"
	"net/http"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
)

// progressRoutes serves /v1/progress: the receipts kept, and a batch of new ones.
type progressRoutes struct{ *Server }

// postProgress stores receipts, once each by id.
func (s progressRoutes) postProgress(w http.ResponseWriter, r *http.Request) {
	var body struct {
		Receipts []json.RawMessage `json:"receipts"`
	}
	if !decode(w, r, &body) {
		return
	}
	if len(body.Receipts) > contract.MaxProgressBatch {
		fail(w, http.StatusBadRequest, "%d receipts in one batch; at most %d", len(body.Receipts), contract.MaxProgressBatch)
		return
	}
	ids := make([]string, len(body.Receipts))
	for i, raw := range body.Receipts {
		var rc struct {
			ID string `json:"id"`
		}
		if err := json.Unmarshal(raw, &rc); err != nil || rc.ID == "" {
			fail(w, http.StatusBadRequest, "receipt %d has no id", i+1)
			return
		}
		ids[i] = rc.ID
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	var grow int64
	for i, raw := range body.Receipts {
		if !s.doc.progressIDs[ids[i]] {
			grow += int64(len(raw)) + 1
		}
	}
	if !s.room(w, grow) {
		return
	}
	accepted := 0
	for i, raw := range body.Receipts {
		if !s.doc.progressIDs[ids[i]] {
			s.doc.progressIDs[ids[i]] = true
			s.doc.Progress = append(s.doc.Progress, raw)
			accepted++
		}
	}
	if accepted > 0 && !s.commit(w, "progress", "") {
		return
	}
	reply(w, map[string]int{"accepted": accepted})
}

func (s progressRoutes) getProgress(w http.ResponseWriter, _ *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := s.doc.Progress
	if out == nil {
		out = []json.RawMessage{}
	}
	reply(w, map[string]any{"receipts": out})
}
