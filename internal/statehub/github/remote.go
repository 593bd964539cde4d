package github

import (
	"context"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
)

// ParseRemote reads a git remote's URL as naming a repository on one of
// hosts: "owner/name", or "" when it names none. The forms are git's own:
// scp-like SSH (git@HOST:owner/name.git), ssh://, https://, http:// and
// git:// URLs, with or without ".git" and a trailing slash, a user and a
// port. Hosts compare without their ports and case: an SSH remote names no
// HTTPS port.
func ParseRemote(remote string, hosts []string) string {
	remote = strings.TrimSpace(remote)
	var host, path string
	switch {
	case strings.Contains(remote, "://"):
		u, err := url.Parse(remote)
		if err != nil {
			return ""
		}
		switch u.Scheme {
		case "ssh", "git+ssh", "https", "http", "git":
		default:
			return ""
		}
		host, path = u.Hostname(), u.Path
	default:
		// scp-like: [user@]host:path, where the host has no slash before
		// the colon (git's own rule that tells it from a local path).
		at, rest, ok := strings.Cut(remote, ":")
		if !ok || strings.Contains(at, "/") {
			return ""
		}
		if _, h, hasUser := strings.Cut(at, "@"); hasUser {
			at = h
		}
		host, path = at, rest
	}
	if !hostIn(host, hosts) {
		return ""
	}
	path = strings.TrimSuffix(strings.Trim(path, "/"), ".git")
	if _, _, err := config.ParseGitHubRepo(path); err != nil {
		return ""
	}
	return path
}

func hostIn(host string, hosts []string) bool {
	for _, h := range hosts {
		if strings.EqualFold(host, h) {
			return true
		}
	}
	return false
}

// remotes remembers each repository's origin URL, asking git again when
// the repository's config file changed, and at least every remoteTTL (a
// worktree's config lives elsewhere).
type remotes struct {
	lookup func(ctx context.Context, path string) (string, error)
	now    func() time.Time

	mu   sync.Mutex
	seen map[string]remoteSeen
}

type remoteSeen struct {
	url     string
	stamp   string // the config file's size and time as last read
	asked   time.Time
	problem string
}

// remoteTTL bounds how long an origin is believed without asking git.
const remoteTTL = 5 * time.Minute

// origin is the origin URL of the repository at path, or why it could not
// be read.
func (r *remotes) origin(ctx context.Context, path string) (url, problem string) {
	stamp := configStamp(path)
	now := r.now()
	r.mu.Lock()
	s, ok := r.seen[path]
	r.mu.Unlock()
	if ok && s.stamp == stamp && now.Sub(s.asked) < remoteTTL {
		return s.url, s.problem
	}
	ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
	defer cancel()
	u, err := r.lookup(ctx, path)
	s = remoteSeen{url: u, stamp: stamp, asked: now}
	if err != nil {
		s.problem = "cannot read its origin remote: " + err.Error()
	}
	r.mu.Lock()
	if r.seen == nil {
		r.seen = map[string]remoteSeen{}
	}
	r.seen[path] = s
	r.mu.Unlock()
	return s.url, s.problem
}

// configStamp is what tells a repository's config changed: its size and
// modification time, "" when it has none of its own.
func configStamp(path string) string {
	fi, err := os.Stat(filepath.Join(path, ".git", "config"))
	if err != nil {
		return ""
	}
	return fi.ModTime().String() + "/" + strconv.FormatInt(fi.Size(), 10)
}
