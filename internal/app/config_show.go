package app

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
)

// configRecord is `config show --json`. Secrets are never part of it: the
// configuration holds none (the State Hub token is fetched by the credential
// command, an argv that is shown like every other setting).
type configRecord struct {
	Paths                    paths.Paths `json:"paths"`
	ConfigFileExists         bool        `json:"config_file_exists"`
	Overrides                []string    `json:"overrides"`
	ConfigVersion            string      `json:"config_version"`
	PolicyProfile            string      `json:"policy_profile"`
	CredentialCommandPresent bool        `json:"credential_command_configured"`
	// Config holds the program's own keys and the shared ones, no others.
	Config any `json:"config"`
}

func newConfigShowCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "show",
		Short: "Print the effective configuration and paths",
		Long: `Print the effective configuration (file values over defaults, then environment
overrides), the paths in use and the effective config version recorded in receipts.
It shows the keys this program reads: its own and those both programs share.
The output is TOML that the program accepts as a config file. It includes the
State Hub credential command (the argv that prints the token when run; the token
itself is never stored or shown).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			l, err := a.Config()
			if err != nil {
				return err
			}
			rec := configRecord{
				Paths: p, ConfigFileExists: l.FileExists, Overrides: l.Overrides,
				ConfigVersion: l.Version, PolicyProfile: l.ProfileRef(),
				CredentialCommandPresent: l.HasCredentialCommand(), Config: l.View(p.Program),
			}
			if rec.Overrides == nil {
				rec.Overrides = []string{}
			}
			if a.JSON {
				return a.PrintJSON(rec)
			}
			body, err := l.TOML(p.Program)
			if err != nil {
				return errs.Wrap(errs.Internal, err, "render config")
			}
			present := "present"
			if !l.FileExists {
				present = "absent; defaults in effect"
			}
			a.Printf("# config file:    %s (%s)\n", p.ConfigFile, present)
			for _, o := range l.Overrides {
				a.Printf("# override:       %s\n", o)
			}
			a.Printf("# state dir:      %s\n", p.StateDir)
			a.Printf("# database:       %s\n", p.Database)
			a.Printf("# log file:       %s\n", p.LogFile)
			a.Printf("# socket:         %s\n", p.Socket)
			if p.Program != paths.Tamq {
				a.Printf("# tamq socket:    %s\n", p.TamqSocket)
			}
			a.Printf("# config version: %s\n", l.Version)
			a.Printf("# policy profile: %s\n", l.ProfileRef())
			a.Printf("\n%s", body)
			return nil
		},
	}
}
