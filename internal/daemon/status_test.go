package daemon

import (
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/health"
	"github.com/tmux-amq/tamq/internal/paths"
)

// The sections every status report has are judged one way for both
// programs: the first problem names its section and carries its exit code.
func TestStatusProblemNamesTheFirstSharedProblem(t *testing.T) {
	up := health.Service{Running: true}
	db := health.SQLite{SchemaVersion: 3, BinarySchemaVersion: 3}
	cases := []struct {
		name string
		svc  health.Service
		db   health.SQLite
		reg  health.Registry
		want errs.Code
	}{
		{"healthy", up, db, health.Registry{}, ""},
		{"not running", health.Service{}, health.SQLite{Error: "gone"}, health.Registry{}, errs.Unavailable},
		{"schema too new", up, health.SQLite{SchemaVersion: 4, BinarySchemaVersion: 3, Error: "newer"}, health.Registry{}, errs.SchemaTooNew},
		{"database unreadable", up, health.SQLite{Error: "locked"}, health.Registry{Error: "x"}, errs.Storage},
		{"registry unreadable", up, db, health.Registry{Error: "no such file"}, errs.RegistryError},
	}
	for _, c := range cases {
		err := StatusProblem(paths.Engine, c.svc, c.db, c.reg)
		if got := errs.CodeOf(err); (err == nil) != (c.want == "") || (err != nil && got != c.want) {
			t.Errorf("%s: %v (code %q), want code %q", c.name, err, got, c.want)
		}
	}
}
