package cli

import (
	"context"
	"errors"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/statehub/devhub"
	"github.com/tmux-amq/tamq/internal/trust"
)

func newDevStateHubCmd(a *app.App) *cobra.Command {
	var listen, data, token, tokenFile string
	cmd := &cobra.Command{
		Use:   "dev-statehub",
		Short: "Run the reference State Hub (for trying the engine, the tests and the demo)",
		Long: `Run the reference State Hub: the routes of the State Hub contract
(docs/statehub-contract.md) over one document kept in memory, or in --data FILE,
replaced atomically after every change. Agents and tests write workplans, tasks,
messages and checkpoints to it; coordination-engine reads them and posts its
receipts. With --token or --token-file every request must carry
"Authorization: Bearer <token>" (prefer --token-file: a command line is visible
to other local users). It stops on SIGTERM or SIGINT.`,
		Example: `  coordination-engine dev-statehub
  coordination-engine dev-statehub --listen 127.0.0.1:8100 --data ~/.local/state/statehub.json --token-file ~/.config/statehub.token`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if token != "" && tokenFile != "" {
				return app.UsageError("give --token or --token-file, not both")
			}
			if tokenFile != "" {
				// The token is a secret, and whoever could write the file
				// could choose it: the file must be the user's and private.
				f, err := trust.OpenPrivate(tokenFile, "token file")
				if errs.Is(err, errs.PermissionDeny) {
					return err
				}
				if err != nil {
					return errs.Wrap(errs.ConfigInvalid, err, "token file")
				}
				b, err := io.ReadAll(f)
				f.Close()
				if err != nil {
					return errs.Wrap(errs.ConfigInvalid, err, "token file")
				}
				if token = strings.TrimSpace(string(b)); token == "" {
					return errs.New(errs.ConfigInvalid, "token file %s is empty", tokenFile)
				}
			}
			// Signals are ours before anything is opened: a SIGINT from now on
			// is a clean stop.
			ctx, stop := daemon.SignalContext(cmd.Context())
			defer stop()
			hub := &devhub.Server{Token: token, Data: data}
			if err := hub.Open(); err != nil {
				return errs.Wrap(errs.ConfigInvalid, err, "cannot load the State Hub data")
			}
			ln, err := net.Listen("tcp", listen)
			if err != nil {
				return errs.Wrap(errs.Unavailable, err, "cannot listen on %s", listen)
			}
			srv := &http.Server{Handler: hub.Handler(), ReadHeaderTimeout: 10 * time.Second}
			done := make(chan error, 1)
			go func() { done <- srv.Serve(ln) }()
			a.Notef("reference State Hub on http://%s (data: %s)", ln.Addr(), orMemory(data))
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
		},
	}
	cmd.Flags().StringVar(&listen, "listen", "127.0.0.1:8000", "address to listen on (host:port)")
	cmd.Flags().StringVar(&data, "data", "", "file to keep the data in (default: memory only)")
	cmd.Flags().StringVar(&token, "token", "", "require this bearer token")
	cmd.Flags().StringVar(&tokenFile, "token-file", "", "require the bearer token in this file (mode 0600)")
	return cmd
}

func orMemory(data string) string {
	if data == "" {
		return "memory only"
	}
	return data
}
