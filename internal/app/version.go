package app

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/buildinfo"
)

type versionRecord struct {
	Program string `json:"program"`
	buildinfo.Info
}

func newVersionCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "version",
		Short: "Print the version",
		Long:  "Print the version, derived from the build: the module version, else the VCS revision (with -dirty when built from modified sources).",
		Args:  cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			info := buildinfo.Get()
			if a.JSON {
				return a.PrintJSON(versionRecord{Program: a.Name(), Info: info})
			}
			a.Printf("%s %s\n", a.Name(), info)
			return nil
		},
	}
}
