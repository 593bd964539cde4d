package cli

import (
	"fmt"
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/app"
	api "github.com/tmux-amq/tamq/internal/tamqapi"
	client "github.com/tmux-amq/tamq/internal/tamqclient"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

func newEndpointsCmd(a *app.App) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "endpoints",
		Short: "List the tmux servers tamq delivers into, and forget the ones gone for good",
		Long: `List the endpoints: one per tmux server tamq opened windows on, named
tmux-amq-<server pid>, with its state (connected while the server runs) and its
windows. An endpoint whose server is gone stays listed, because its messages
name it, until it is replaced on the same socket or forgotten with
'tamq endpoints forget ID'. --all lists forgotten endpoints too.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			res, err := client.New(p).Endpoints(cmd.Context(), all)
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(res.Endpoints)
			}
			if len(res.Endpoints) == 0 {
				a.Printf("no endpoints (open windows with `tamq open REPO...`)\n")
				return nil
			}
			// What the service answers comes from its database and tmux:
			// escaped, nothing in it acts in the terminal.
			esc := textsafe.Escape
			tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
			fmt.Fprintf(tw, "ENDPOINT\tSTATE\tTMUX SOCKET\tWINDOWS\n")
			for _, ep := range res.Endpoints {
				state := ep.State
				if ep.Forgotten {
					state = "forgotten"
				}
				fmt.Fprintf(tw, "%s\t%s\t%s\t%s\n", esc(ep.ID), esc(state), esc(ep.TmuxSocket), esc(windowList(ep.Windows)))
			}
			return tw.Flush()
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "include forgotten endpoints")
	cmd.AddCommand(newEndpointsForgetCmd(a))
	return cmd
}

// windowList names an endpoint's windows by repo, marking the ones whose
// pane is gone or whose agent has exited.
func windowList(ws []api.EndpointWindow) string {
	if len(ws) == 0 {
		return "-"
	}
	out := ""
	for i, w := range ws {
		if i > 0 {
			out += ", "
		}
		out += w.Repo
		if !w.Alive {
			out += " (gone)"
		}
	}
	return out
}
