package doctor

import (
	"context"
	"fmt"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// Service pings the program's service at p. Not running is a warning (the
// commands that need it start it, or say how); a service of another version
// than this binary fails: it is what every command talks to, and an old one
// lacks what the new commands ask of it. running says whether it answered.
func Service(ctx context.Context, p paths.Paths, version string) (c Check, running bool) {
	const name = "service"
	prog := string(p.Program)
	var res daemon.PingResult
	err := daemon.Client(p, PingTimeout).Call(ctx, daemon.OpPing, nil, &res)
	switch {
	case errs.Is(err, errs.Unavailable):
		return warn(name, fmt.Sprintf("%s's service is not running (nothing listens on %s)", prog, p.Socket),
			fmt.Sprintf("`%s start --detach`", prog)), false
	case err != nil:
		return fail(name, fmt.Sprintf("%s's service at %s does not answer as it should: %v", prog, p.Socket, err),
			fixOf(err, fmt.Sprintf("see `%s status`; `%s stop && %s start --detach` restarts it", prog, prog, prog))), false
	case res.ServerVersion != version:
		return fail(name, fmt.Sprintf("%s's service (pid %d) runs version %s, this %s is %s", prog, res.PID, res.ServerVersion, prog, version),
			fmt.Sprintf("restart it on this build: `%s stop && %s start --detach`", prog, prog)), true
	}
	return ok(name, fmt.Sprintf("running (pid %d, version %s, protocol %s)", res.PID, res.ServerVersion, res.Proto)), true
}
