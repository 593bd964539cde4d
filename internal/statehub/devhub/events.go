package devhub

import (
	"encoding/json"
	"fmt"
	"net/http"
	"time"
)

// eventRoutes serves /v1/events: a stream of hints, one per change.
type eventRoutes struct{ *Server }

// events streams a hint per change until the client goes.
func (s eventRoutes) stream(w http.ResponseWriter, r *http.Request) {
	flusher, ok := w.(http.Flusher)
	if !ok {
		fail(w, http.StatusNotFound, "no event stream here")
		return
	}
	ch := make(chan event, 64)
	s.mu.Lock()
	s.doc.events[ch] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.doc.events, ch)
		s.mu.Unlock()
	}()
	// A stream lasts as long as its client: the server's read and write
	// deadlines, which end slow requests, must not end it.
	rc := http.NewResponseController(w)
	rc.SetReadDeadline(time.Time{})
	rc.SetWriteDeadline(time.Time{})
	w.Header().Set("Content-Type", "text/event-stream")
	w.Header().Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	flusher.Flush()
	for {
		select {
		case <-r.Context().Done():
			return
		case e := <-ch:
			b, _ := json.Marshal(e)
			if _, err := fmt.Fprintf(w, "data: %s\n\n", b); err != nil {
				return
			}
			flusher.Flush()
		}
	}
}
