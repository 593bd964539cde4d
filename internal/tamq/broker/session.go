package broker

import (
	"context"
	"net"
	"time"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// OpenSession opens the stream a window's broker keeps with the service at p:
// the service sends deliveries on it, the broker its answers and its agent's
// state. The handshake is bounded (10 s, as the client's quick questions);
// the stream then has no deadline.
func OpenSession(ctx context.Context, p paths.Paths, args api.BrokerSessionArgs) (net.Conn, *unixrpc.FrameReader, error) {
	return unixrpc.OpenStream(ctx, daemon.Client(p, 10*time.Second), api.OpBrokerSession, args)
}
