package app

import (
	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

func newDBVersionCmd(a *App) *cobra.Command {
	return &cobra.Command{
		Use:   "db-version",
		Short: "Report the database schema version",
		Long: `Report the schema version of the program's SQLite database and the newest
version this binary knows. Read-only: it never creates or migrates the database
(the service migrates it when it starts).`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			p, err := a.Paths()
			if err != nil {
				return err
			}
			info, err := sqlitedb.Inspect(p.Database, sqlitedb.LatestVersion(a.Migrations))
			if err != nil {
				return err
			}
			if a.JSON {
				return a.PrintJSON(info)
			}
			a.Printf("database:              %s\n", info.Path)
			switch {
			case !info.Exists:
				a.Printf("schema version:        none (not created yet)\n")
			case info.SchemaVersion > info.BinarySchemaVersion:
				a.Printf("schema version:        %d (newer than this binary; upgrade %s)\n", info.SchemaVersion, a.Name())
			case info.SchemaVersion < info.BinarySchemaVersion:
				a.Printf("schema version:        %d (migrates to %d when the service starts)\n", info.SchemaVersion, info.BinarySchemaVersion)
			default:
				a.Printf("schema version:        %d\n", info.SchemaVersion)
			}
			a.Printf("binary schema version: %d\n", info.BinarySchemaVersion)
			return nil
		},
	}
}
