package cli

import (
	"context"
	"errors"
	"net"
	"net/netip"
	"path/filepath"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/textsafe"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

func newDevStateHubCmd(a *app.App) *cobra.Command {
	var o devHubOptions
	cmd := &cobra.Command{
		Use:   "dev-statehub",
		Short: "Run the reference State Hub (for trying the engine, the tests and the demo)",
		Long: `Run the reference State Hub: the routes of the State Hub contract
(docs/statehub-contract.md) over one document kept in memory, or in --data FILE,
replaced atomically after every change. Agents and tests write workplans, tasks,
messages and checkpoints to it; coordination-engine reads them and posts its
receipts.

By default it listens on a Unix socket only you can use, statehub.sock in the
runtime directory ($XDG_RUNTIME_DIR, else ${TMPDIR:-/tmp}/tamq-<uid>): no token is needed
there. Point both programs at it (statehub.api_base = "unix://…/statehub.sock", or
STATEHUB_API_BASE); unset, they look at the spec's default, http://127.0.0.1:8000,
and it says so when it starts. --listen
host:port listens on TCP instead, and then every request must carry
"Authorization: Bearer <token>": the token of --token-file, or of --token
(visible to other local users in the process list), or else one made at the
first start and kept in statehub.token in coordination-engine's state
directory (mode 0600; clients read it with statehub.credential_command =
["cat", "<that file>"]). --no-token drops it, on a loopback address only; an
address other machines may reach needs a token. It stops on SIGTERM or SIGINT.`,
		Example: `  coordination-engine dev-statehub
  coordination-engine dev-statehub --data ~/.local/state/statehub.json
  coordination-engine dev-statehub --listen 127.0.0.1:8100 --token-file ~/.config/statehub.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error { return runDevStateHub(cmd.Context(), a, o) },
	}
	cmd.Flags().StringVar(&o.listen, "listen", "", "unix:///path/to/socket or host:port (default: statehub.sock in the runtime directory)")
	cmd.Flags().StringVar(&o.data, "data", "", "file to keep the data in (default: memory only)")
	cmd.Flags().StringVar(&o.token, "token", "", "require this bearer token")
	cmd.Flags().StringVar(&o.tokenFile, "token-file", "", "require the bearer token in this file (mode 0600)")
	cmd.Flags().BoolVar(&o.noToken, "no-token", false, "on a loopback TCP address: require no token")
	return cmd
}

// devHubOptions are dev-statehub's flags.
type devHubOptions struct {
	listen, data, token, tokenFile string
	noToken                        bool
}

func runDevStateHub(ctx context.Context, a *app.App, o devHubOptions) error {
	if o.token != "" && o.tokenFile != "" || o.noToken && (o.token != "" || o.tokenFile != "") {
		return app.UsageError("give one of --token, --token-file and --no-token, not both")
	}
	p, err := a.Paths()
	if err != nil {
		return err
	}
	made, err := hubAddressAndToken(p, &o)
	if err != nil {
		return err
	}
	// Signals are ours before anything is opened: a SIGINT from now on
	// is a clean stop.
	ctx, stop := daemon.SignalContext(ctx)
	defer stop()
	hub := &devhub.Server{Token: o.token, Data: o.data}
	if err := hub.Open(); err != nil {
		return errs.Wrap(errs.ConfigInvalid, err, "cannot load the State Hub data")
	}
	ln, err := listenHub(o.listen)
	if err != nil {
		return err
	}
	defer ln.Remove()
	if !ln.Loopback && o.token == "" {
		ln.Close()
		return errs.New(errs.PermissionDeny, "--listen %s: other machines may reach that address, and --no-token would let them in", o.listen).
			WithHint("listen on 127.0.0.1 or a Unix socket, or keep the token")
	}
	srv := hub.HTTPServer()
	done := make(chan error, 1)
	go func() { done <- srv.Serve(hub.Listener(ln)) }()
	noteHubAccess(a, o, ln, made)
	// Last: the line that says it is ready (the demo waits for it).
	a.Notef("reference State Hub on %s (data: %s)", ln.URL, orMemory(o.data))
	select {
	case err := <-done:
		return errs.Wrap(errs.Internal, err, "State Hub server")
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	// Event streams never end by themselves: they are cut at the deadline.
	if err := srv.Shutdown(sctx); err != nil && !errors.Is(err, context.DeadlineExceeded) {
		return err
	}
	return nil
}

// hubAddressAndToken fills in the default address (the socket in the
// runtime directory) and the token: --token-file's, or on a TCP port
// without --token or --no-token one kept in the state directory (made says
// it was made now).
func hubAddressAndToken(p paths.Paths, o *devHubOptions) (made bool, err error) {
	if o.listen == "" {
		o.listen = "unix://" + p.StateHubSocket
		if p.SocketDirPrivate(p.StateHubSocket) {
			// In a shared /tmp only a directory of our own keeps
			// others from the socket's path.
			if err := unixrpc.CheckPrivateDir(p.PrivateDir, true); err != nil {
				return false, err
			}
		}
	}
	switch {
	case o.tokenFile != "":
		o.token, _, err = devhub.TokenFile(o.tokenFile, false)
	case !isSocket(o.listen) && o.token == "" && !o.noToken:
		// A port is open to every local user: a token by default.
		o.tokenFile = filepath.Join(p.StateDir, "statehub.token")
		o.token, made, err = devhub.TokenFile(o.tokenFile, true)
	}
	return made, err
}

// noteHubAccess says what a client needs: the token and where it is, a
// warning for an address other machines reach, and how to point both
// programs here when their configuration looks elsewhere.
func noteHubAccess(a *app.App, o devHubOptions, ln *listening, made bool) {
	switch {
	case o.tokenFile != "":
		what := "token"
		if made {
			what = "new token"
		}
		a.Notef("requests need the %s in %s: give clients statehub.credential_command = [\"cat\", %q]", what, o.tokenFile, o.tokenFile)
	case o.token != "":
		a.Notef("requests need the token of --token")
	}
	if !ln.Loopback {
		a.Notef("warning: %s is reachable from other machines, and http carries the token in clear; prefer 127.0.0.1, a Unix socket, or https in front", o.listen)
	}
	if cfg, err := a.Config(); err == nil && cfg.StateHub.APIBase != ln.URL {
		// The programs look at the spec's default (a loopback port)
		// unless told: say how to point them here.
		a.Notef("both programs read State Hub at %s (%s) as configured here: point them at this one with statehub.api_base = %q in their config files, or %s=%s in their environment",
			textsafe.RedactURL(cfg.StateHub.APIBase), cfg.APIBaseOrigin(), ln.URL, paths.StateHubAPIBaseVar, ln.URL)
	}
}

func orMemory(data string) string {
	if data == "" {
		return "memory only"
	}
	return data
}

// listening is where the server listens and how to leave it.
type listening struct {
	net.Listener
	// URL is what clients put in statehub.api_base.
	URL string
	// Loopback is false for a TCP address other machines may reach.
	Loopback bool
	remove   func() error
}

// Remove deletes the socket file when the server listened on one it made.
func (l *listening) Remove() error {
	if l.remove == nil {
		return nil
	}
	return l.remove()
}

// isSocket says whether addr names a Unix socket (unix:///path) rather
// than a TCP host:port.
func isSocket(addr string) bool { return strings.HasPrefix(addr, "unix://") }

// listenHub opens addr: "unix:///path" binds a socket there that only the
// user may use (0600, made as the programs make theirs: a stale one of the
// user's is replaced, anything else refused), host:port a TCP port.
func listenHub(addr string) (*listening, error) {
	if isSocket(addr) {
		path := strings.TrimPrefix(addr, "unix://")
		if !filepath.IsAbs(path) {
			return nil, errs.New(errs.Usage, "--listen %s: a socket's path must be absolute, as unix:///run/user/1000/statehub.sock", addr)
		}
		ln, err := unixrpc.Listen(path, unixrpc.Names{Program: "dev-statehub"})
		if e := (*errs.Error)(nil); errors.As(err, &e) && e.Code == errs.AlreadyRunning {
			e.Hint = "another State Hub listens there: stop it, or give --listen another address"
		}
		if err != nil {
			return nil, err
		}
		return &listening{Listener: ln, URL: "unix://" + path, Loopback: true, remove: ln.Remove}, nil
	}
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return nil, errs.New(errs.Usage, "--listen %s: give host:port (as 127.0.0.1:8000) or unix:///path/to/socket", addr)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, errs.Wrap(errs.Unavailable, err, "cannot listen on %s", addr)
	}
	a, err := netip.ParseAddr(strings.Trim(host, "[]"))
	loopback := host == "localhost" || err == nil && a.Unmap().IsLoopback()
	return &listening{Listener: ln, URL: "http://" + ln.Addr().String(), Loopback: loopback}, nil
}
