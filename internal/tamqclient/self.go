package tamqclient

import (
	"context"
	"os"

	"github.com/tmux-amq/tamq/internal/door"
)

// Self is who the calling process is to tamq's service (its whois: the
// derivation both daemons use), for a command that reads a database
// directly instead of asking a daemon (tamq's history and export, the
// engine's listings while it is stopped), so that it keeps the door policy
// too. With tamq not answering, what the process's environment says stands
// in (getenv: the command's environment): a TAMQ_REPO narrows it to that
// repo's own, an agent's mark makes it unplaced. The environment is
// claimed, so it only ever narrows what a command reads.
func (c *Client) Self(ctx context.Context, getenv func(string) string) door.Caller {
	if res, err := c.Whois(ctx, int32(os.Getpid())); err == nil {
		return res.Caller()
	}
	env := map[string]string{}
	for _, v := range door.EnvVars {
		if s := getenv(v); s != "" {
			env[v] = s
		}
	}
	repo, agent := door.Marks(env)
	switch {
	case repo != "":
		return door.Caller{Kind: door.Agent, Repo: repo}
	case agent != "":
		return door.Place(door.Unplaced{AgentAbove: agent})
	}
	return door.Caller{Kind: door.Operator}
}
