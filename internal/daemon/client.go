package daemon

// The client side of every service: the operations any of our services
// answers (ops.go), and a protocol client bound to a program's paths.

import (
	"context"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// Names are how the transport names the program of p in its messages.
func Names(p paths.Paths) unixrpc.Names {
	return unixrpc.Names{Program: string(p.Program), SocketVar: p.SocketVar()}
}

// Client returns a protocol client for the service at p.
func Client(p paths.Paths, timeout time.Duration) *unixrpc.Client {
	c := &unixrpc.Client{Socket: p.Socket, Names: Names(p), Timeout: timeout}
	if p.SocketDirPrivate(p.Socket) {
		c.PrivateDir = p.PrivateDir
	}
	return c
}

// Ping asks the service whether it is alive.
func Ping(ctx context.Context, p paths.Paths) (PingResult, error) {
	var res PingResult
	err := Client(p, 5*time.Second).Call(ctx, OpPing, nil, &res)
	return res, err
}

// WaitChange waits, up to wait, until the service's state is newer than the
// version since, and returns the version it has then (OpChanges).
func WaitChange(ctx context.Context, p paths.Paths, since uint64, wait time.Duration) (uint64, error) {
	var res ChangesResult
	err := Client(p, wait+5*time.Second).Call(ctx, OpChanges, ChangesArgs{Since: since, WaitMS: int(wait.Milliseconds())}, &res)
	return res.Version, err
}

// Stop asks the service to stop within its grace period.
func Stop(ctx context.Context, p paths.Paths) (ShutdownResult, error) {
	var res ShutdownResult
	err := Client(p, 5*time.Second).Call(ctx, OpShutdown, nil, &res)
	return res, err
}

// BaseClient is what every program's typed client has in common: the calls
// any of our services answers, and the one way to call the others.
type BaseClient struct {
	Paths paths.Paths
	// WaitRestart is how long a call waits for a service that is not
	// listening to come back (see unixrpc.Client); zero fails at once.
	WaitRestart time.Duration
}

// Call calls op with args, bounded by timeout (dial included).
func (c BaseClient) Call(ctx context.Context, timeout time.Duration, op string, args, result any) error {
	pc := Client(c.Paths, timeout)
	pc.WaitRestart = c.WaitRestart
	return pc.Call(ctx, op, args, result)
}

// Ping asks the service whether it is alive and which one answers.
func (c BaseClient) Ping(ctx context.Context) (PingResult, error) { return Ping(ctx, c.Paths) }

// Hello introduces the client and returns the negotiated protocol and the
// service's capabilities.
func (c BaseClient) Hello(ctx context.Context, client string) (HelloResult, error) {
	var res HelloResult
	err := c.Call(ctx, 5*time.Second, OpHello, HelloArgs{Client: client, ClientVersion: buildinfo.Get().Version}, &res)
	return res, err
}

// Stop asks the service to stop within its grace period.
func (c BaseClient) Stop(ctx context.Context) (ShutdownResult, error) { return Stop(ctx, c.Paths) }

// Listener says which process serves the service's socket: the pid its
// ping answers.
func (c BaseClient) Listener(ctx context.Context) (unixrpc.Peer, error) {
	res, err := c.Ping(ctx)
	if err != nil {
		return unixrpc.Peer{}, err
	}
	return unixrpc.Peer{PID: int32(res.PID)}, nil
}

// Call is one request to c's service answered with an R: the typed clients'
// methods are each this one call.
func Call[R any](ctx context.Context, c BaseClient, timeout time.Duration, op string, args any) (R, error) {
	var res R
	err := c.Call(ctx, timeout, op, args, &res)
	return res, err
}
