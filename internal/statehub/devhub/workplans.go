package devhub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// workplanRoutes serves the workplans and their tasks: GET and PUT
// /v1/workplans, PATCH /v1/tasks/{id}.
type workplanRoutes struct{ *Server }

func (s workplanRoutes) getWorkplans(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	etag := `"` + strconv.FormatInt(s.doc.Rev, 10) + `"`
	w.Header().Set("ETag", etag)
	if r.Header.Get("If-None-Match") == etag {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	wps := s.doc.Workplans
	if wps == nil {
		wps = []workplan{}
	}
	reply(w, map[string]any{"workplans": wps})
}

func checkWorkplan(wp workplan) error {
	if err := checkID("workplan id", wp.ID); err != nil {
		return err
	}
	if err := checkID("repo", wp.Repo); err != nil {
		return err
	}
	if !slices.Contains(contract.WorkplanStatuses, wp.Status) {
		return fmt.Errorf("workplan status %q is not one of %s", textsafe.Escape(wp.Status), strings.Join(contract.WorkplanStatuses, ", "))
	}
	seen := map[string]bool{}
	for _, t := range wp.Tasks {
		if err := checkID("task id", t.ID); err != nil {
			return err
		}
		if seen[t.ID] {
			return fmt.Errorf("task %s is listed twice", t.ID)
		}
		seen[t.ID] = true
		if err := checkID("repo of task "+t.ID, t.Repo); err != nil {
			return err
		}
		if !slices.Contains(contract.TaskStatuses, t.Status) {
			return fmt.Errorf("task %s: status %q is not one of %s", t.ID, textsafe.Escape(t.Status), strings.Join(contract.TaskStatuses, ", "))
		}
		if err := checkNote(t.Note); err != nil {
			return fmt.Errorf("task %s: %w", t.ID, err)
		}
	}
	return nil
}

// checkNote refuses a note that is long or not one line of plain text.
func checkNote(note string) error {
	if len(note) > maxNote {
		return fmt.Errorf("a note of %d bytes; at most %d", len(note), maxNote)
	}
	if p := textsafe.ControlProblem(note); p != "" {
		return fmt.Errorf("the note %s", p)
	}
	return nil
}

// putWorkplan creates or replaces a workplan whole. A task that is the same
// as before keeps its revision; the workplan gets a new one.
func (s workplanRoutes) putWorkplan(w http.ResponseWriter, r *http.Request) {
	var wp workplan
	if !decode(w, r, &wp) {
		return
	}
	if wp.ID == "" {
		wp.ID = r.PathValue("id")
	}
	if wp.ID != r.PathValue("id") {
		fail(w, http.StatusBadRequest, "the body's id %q is not the path's %q", textsafe.Escape(wp.ID), textsafe.Escape(r.PathValue("id")))
		return
	}
	if err := checkWorkplan(wp); err != nil {
		fail(w, http.StatusBadRequest, "%s", err)
		return
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	old := map[string]task{}
	i := slices.IndexFunc(s.doc.Workplans, func(x workplan) bool { return x.ID == wp.ID })
	grow := jsonSize(wp)
	if i >= 0 {
		grow -= jsonSize(s.doc.Workplans[i])
		for _, t := range s.doc.Workplans[i].Tasks {
			old[t.ID] = t
		}
	}
	if !s.room(w, grow) {
		return
	}
	for j := range wp.Tasks {
		t := &wp.Tasks[j]
		prev, ok := old[t.ID]
		t.Revision = prev.Revision
		if !ok || !sameTask(prev, *t) {
			t.Revision = s.nextRev()
		}
	}
	wp.Revision = s.nextRev()
	if i >= 0 {
		s.doc.Workplans[i] = wp
	} else {
		s.doc.Workplans = append(s.doc.Workplans, wp)
	}
	if s.commit(w, "workplan", wp.ID) {
		reply(w, wp)
	}
}

func sameTask(a, b task) bool {
	a.Revision, b.Revision = "", ""
	x, _ := json.Marshal(a)
	y, _ := json.Marshal(b)
	return string(x) == string(y)
}

// taskPatch is what PATCH /v1/tasks/{id} may change.
type taskPatch struct {
	Status            *string                    `json:"status"`
	NeedsHuman        *bool                      `json:"needs_human"`
	InterventionNotes *[]contract.Note           `json:"intervention_notes"`
	ProposedActions   *[]contract.ProposedAction `json:"proposed_actions"`
	SecretsRequired   *bool                      `json:"secrets_required"`
	// Note comes with a status an agent states (coordination-engine task
	// set); the task keeps the last one.
	Note *string `json:"note"`
}

func (s workplanRoutes) patchTask(w http.ResponseWriter, r *http.Request) {
	var p taskPatch
	if !decode(w, r, &p) {
		return
	}
	if p.Status != nil && !slices.Contains(contract.TaskStatuses, *p.Status) {
		fail(w, http.StatusBadRequest, "status %q is not one of %s", textsafe.Escape(*p.Status), strings.Join(contract.TaskStatuses, ", "))
		return
	}
	if p.Note != nil {
		if err := checkNote(*p.Note); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	id := r.PathValue("id")
	s.mu.Lock()
	defer s.mu.Unlock()
	for i := range s.doc.Workplans {
		wp := &s.doc.Workplans[i]
		for j := range wp.Tasks {
			if wp.Tasks[j].ID != id {
				continue
			}
			// Changed on a copy, so a change over the document's cap changes nothing.
			t := new(wp.Tasks[j])
			if p.Status != nil {
				t.Status = *p.Status
			}
			if p.NeedsHuman != nil {
				t.NeedsHuman = *p.NeedsHuman
			}
			if p.InterventionNotes != nil {
				t.InterventionNotes = *p.InterventionNotes
			}
			if p.ProposedActions != nil {
				t.ProposedActions = *p.ProposedActions
			}
			if p.SecretsRequired != nil {
				t.SecretsRequired = *p.SecretsRequired
			}
			if p.Note != nil {
				t.Note = *p.Note
			}
			if !s.room(w, jsonSize(t)-jsonSize(wp.Tasks[j])) {
				return
			}
			wp.Tasks[j] = *t
			t = &wp.Tasks[j]
			t.Revision = s.nextRev()
			wp.Revision = s.nextRev()
			if s.commit(w, "workplan", wp.ID) {
				reply(w, *t)
			}
			return
		}
	}
	fail(w, http.StatusNotFound, "no task %s", textsafe.Escape(id))
}
