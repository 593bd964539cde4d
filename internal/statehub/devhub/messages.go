package devhub

import (
	"net/http"
	"slices"
	"strconv"

	"github.com/tmux-amq/tamq/internal/statehub/contract"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// messageRoutes serves /v1/messages: the list without bodies, one with its body,
// a new one, and marking one read.
type messageRoutes struct{ *Server }

func (s messageRoutes) getMessages(w http.ResponseWriter, r *http.Request) {
	unread := r.URL.Query().Get("unread") == "true"
	s.mu.Lock()
	defer s.mu.Unlock()
	out := []contract.Message{}
	for _, m := range s.doc.Messages {
		if !unread || !m.Read {
			out = append(out, m.Message) // bodies only one at a time
		}
	}
	reply(w, map[string]any{"messages": out})
}

// getMessage serves one message with its body.
func (s messageRoutes) getMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if i, ok := s.messageOf(w, r); ok {
		reply(w, s.doc.Messages[i])
	}
}

// messageOf is the index of the message the request's path names, or
// false once it answered 404. The caller holds s.mu.
func (s messageRoutes) messageOf(w http.ResponseWriter, r *http.Request) (int, bool) {
	id := r.PathValue("id")
	i := slices.IndexFunc(s.doc.Messages, func(x message) bool { return x.ID == id })
	if i < 0 {
		fail(w, http.StatusNotFound, "no message %s", textsafe.Escape(id))
	}
	return i, i >= 0
}

func (s messageRoutes) postMessage(w http.ResponseWriter, r *http.Request) {
	var m message
	if !decode(w, r, &m) {
		return
	}
	if len(m.Body) > contract.MaxMessageBody {
		fail(w, http.StatusBadRequest, "a body of %d bytes; at most %d", len(m.Body), contract.MaxMessageBody)
		return
	}
	for what, v := range map[string]string{"to_repo": m.ToRepo, "from": m.From} {
		if err := checkID(what, v); err != nil {
			fail(w, http.StatusBadRequest, "%s", err)
			return
		}
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if m.ID == "" {
		m.ID = "m" + strconv.FormatInt(s.doc.Rev+1, 10)
	} else if err := checkID("message id", m.ID); err != nil {
		fail(w, http.StatusBadRequest, "%s", err)
		return
	}
	if slices.ContainsFunc(s.doc.Messages, func(x message) bool { return x.ID == m.ID }) {
		fail(w, http.StatusConflict, "message %s exists", m.ID)
		return
	}
	if !s.room(w, jsonSize(m)) {
		return
	}
	m.Revision = s.nextRev()
	if m.CreatedAt.IsZero() {
		m.CreatedAt = s.Now()
	}
	s.doc.Messages = append(s.doc.Messages, m)
	if s.commit(w, "message", m.ID) {
		reply(w, m.Message)
	}
}

func (s messageRoutes) readMessage(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	i, ok := s.messageOf(w, r)
	if !ok {
		return
	}
	if !s.doc.Messages[i].Read {
		s.doc.Messages[i].Read = true
		s.doc.Messages[i].Revision = s.nextRev()
		if !s.commit(w, "message", s.doc.Messages[i].ID) {
			return
		}
	}
	reply(w, s.doc.Messages[i].Message)
}
