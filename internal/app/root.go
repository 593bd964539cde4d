package app

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/buildinfo"
)

// NewRoot builds a program's root command with the global flags and the commands
// both programs share. The caller adds its own commands.
func NewRoot(a *App) *cobra.Command {
	root := &cobra.Command{
		Use:           a.Name(),
		Short:         a.Short,
		Version:       buildinfo.Get().String(),
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, args []string) error {
			if a.Quiet && a.Verbose {
				return UsageError("--quiet and --verbose cannot be used together")
			}
			markStarted(cmd.Root())
			return nil
		},
		CompletionOptions: cobra.CompletionOptions{HiddenDefaultCmd: false},
	}
	root.SetVersionTemplate(`{{.Name}} {{.Version}}` + "\n")
	flags := root.PersistentFlags()
	flags.BoolVar(&a.JSON, "json", false, "print machine-readable JSON records (and errors as JSON on stderr)")
	flags.BoolVarP(&a.Quiet, "quiet", "q", false, "print errors only")
	flags.BoolVarP(&a.Verbose, "verbose", "v", false, "print debug diagnostics")
	// Cobra adds --version itself but with -v, which we use for --verbose; the spec
	// asks for -V.
	root.Flags().BoolP("version", "V", false, "print the version and exit")
	root.SetFlagErrorFunc(func(_ *cobra.Command, err error) error { return UsageError("%v", err) })

	root.AddCommand(
		newVersionCmd(a),
		newConfigCmd(a),
		newDBVersionCmd(a),
		newReposCmd(a),
	)
	return root
}
