package app

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/errs"
)

// pathCause drops the *fs.PathError wrapper when the message already names the path.
func pathCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

type validateRecord struct {
	Valid         bool   `json:"valid"`
	File          string `json:"file"`
	FileExists    bool   `json:"file_exists"`
	ConfigVersion string `json:"config_version"`
	PolicyProfile string `json:"policy_profile"`
}

func newConfigValidateCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "validate [FILE]",
		Short: "Check a config file (default: the one in use)",
		Long: `Check a config file: TOML syntax, unknown keys, value ranges, enums and the
selected policy profile, with environment overrides applied. Exits 0 when valid,
else prints the first problem (naming the file and key) and exits non-zero.`,
		Args: cobra.MaximumNArgs(1),
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			if len(args) == 1 {
				if p.ConfigFile, err = filepath.Abs(args[0]); err != nil {
					return UsageError("%v", err)
				}
				// A file named on the command line must exist; defaults do not count.
				if _, err := os.Stat(p.ConfigFile); err != nil {
					return errs.New(errs.ConfigInvalid, "cannot read config file %s: %v", p.ConfigFile, pathCause(err))
				}
			}
			l, err := config.Load(p)
			if err != nil {
				return err
			}
			rec := validateRecord{Valid: true, File: l.File, FileExists: l.FileExists, ConfigVersion: l.Version, PolicyProfile: l.ProfileRef()}
			if a.JSON {
				return a.PrintJSON(rec)
			}
			if !l.FileExists {
				a.Printf("%s: no config file; the defaults are valid (config version %s)\n", l.File, l.Version)
				return nil
			}
			a.Printf("%s: valid (config version %s, policy %s)\n", l.File, l.Version, l.ProfileRef())
			return nil
		},
	}
}
