package broker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"time"

	api "github.com/tmux-amq/tamq/internal/tamqapi"
)

// Spool is the file where a broker keeps the lines it could not send while
// the service was down: STATE_DIR/spool/<broker pid>.jsonl, one send request
// a line with the time the line was seen. The directory is 0700 and the file
// 0600: it holds message bodies.
type Spool struct {
	Path string
}

// SpoolFor is the spool of the broker with process id pid.
func SpoolFor(stateDir string, pid int) *Spool {
	return &Spool{Path: filepath.Join(stateDir, "spool", fmt.Sprintf("%d.jsonl", pid))}
}

// Append adds one line.
func (s *Spool) Append(m api.SendArgs, seen time.Time) error {
	line, err := spoolLine(m, seen)
	if err != nil {
		return err
	}
	if err := s.dir(); err != nil {
		return err
	}
	f, err := os.OpenFile(s.Path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return err
	}
	if _, err := f.Write(line); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}

// Rewrite leaves just rest in the file (by a rename, so a crash leaves the
// old or the new content, never half), and removes the file when rest is
// empty.
func (s *Spool) Rewrite(rest []pending) error {
	if len(rest) == 0 {
		if err := os.Remove(s.Path); err != nil && !os.IsNotExist(err) {
			return err
		}
		return nil
	}
	var buf bytes.Buffer
	for _, p := range rest {
		line, err := spoolLine(p.m, p.seen)
		if err != nil {
			return err
		}
		buf.Write(line)
	}
	tmp := s.Path + ".new"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o600); err != nil {
		return err
	}
	return os.Rename(tmp, s.Path)
}

func (s *Spool) dir() error {
	dir := filepath.Dir(s.Path)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return err
	}
	return os.Chmod(dir, 0o700) // an older, looser directory is tightened
}

func spoolLine(m api.SendArgs, seen time.Time) ([]byte, error) {
	seen = seen.UTC()
	m.ObservedAt = &seen
	b, err := json.Marshal(m)
	if err != nil {
		return nil, err
	}
	return append(b, '\n'), nil
}
