package daemon

import (
	"context"
	"database/sql"
	"os"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/health"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/unixrpc"
)

// StoppedStatus is the process section of a program whose service does not
// answer: where it would listen and log.
func StoppedStatus(p paths.Paths) health.Service {
	return health.Service{Socket: p.Socket, LogFile: p.LogFile}
}

// RunningStatus is the process section the running service reports.
func RunningStatus(p paths.Paths, started, now time.Time, profile, configVersion string, orwell bool) health.Service {
	started = started.UTC()
	return health.Service{
		Running: true, PID: os.Getpid(), StartedAt: &started, UptimeSeconds: now.Sub(started).Seconds(),
		ServerVersion: buildinfo.Get().Version, Proto: unixrpc.Version,
		Socket: p.Socket, LogFile: p.LogFile, Orwell: orwell,
		PolicyProfile: profile, ConfigVersion: configVersion,
	}
}

// DatabaseStatus is the database section: read through reader (the running
// service's, so a status request opens no connection) or, when reader is
// nil, from the file opened read-only.
func DatabaseStatus(ctx context.Context, reader *sql.DB, path string, migrations []sqlitedb.Migration) health.SQLite {
	known := sqlitedb.LatestVersion(migrations)
	var st health.SQLite
	var err error
	if reader != nil {
		st, err = sqlitedb.InspectOpen(ctx, reader, path, known)
	} else {
		st, err = sqlitedb.Inspect(path, known)
	}
	if err != nil {
		st.Error = err.Error()
	} else if st.SchemaVersion > known {
		st.Error = "schema is newer than this binary supports"
	}
	return st
}

// RegistryStatus is the gita registry section.
func RegistryStatus(registry func() (*gita.Registry, error)) health.Registry {
	reg, err := registry()
	if err != nil {
		return health.Registry{Error: err.Error()}
	}
	return health.Registry{Path: reg.ReposFile, Readable: true, RepoCount: len(reg.Repos), UnregisteredCount: len(reg.Unregistered)}
}

// StatusProblem is the first problem of the sections every status report
// has, with the code `status` exits with: the service must run, and its
// database and the gita registry must be readable. Each program judges its
// own sections after these.
func StatusProblem(program paths.Program, svc health.Service, db health.SQLite, reg health.Registry) error {
	switch {
	case !svc.Running:
		return errs.New(errs.Unavailable, "%s is not running", program).WithHint("start it with `%s start --detach`", program)
	case db.Error != "" && db.SchemaVersion > db.BinarySchemaVersion:
		return errs.New(errs.SchemaTooNew, "database: %s", db.Error)
	case db.Error != "":
		return errs.New(errs.Storage, "database: %s", db.Error)
	case reg.Error != "":
		return errs.New(errs.RegistryError, "gita registry: %s", reg.Error)
	}
	return nil
}
