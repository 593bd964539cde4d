package doctor

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/tmux-amq/tamq/internal/buildinfo"
	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
)

// clockSlack is how far behind the newest recorded time the clock may be
// before it counts as gone backwards: clocks are stepped by a few
// milliseconds to seconds; a minute is a clock that is wrong.
const clockSlack = time.Minute

// Clock judges the system clock now against the newest time the program
// recorded in its database (zero: none) and the time the binary's source was
// committed (zero: unknown). Both programs order messages, leases and
// deadlines by the clock, so one that went backwards makes new records sort
// before old ones and deadlines come late.
func Clock(now, newest, built time.Time) Check {
	const name = "clock"
	fix := "set the system clock right (e.g. `sudo timedatectl set-ntp true`, then check `date`)"
	switch {
	case !newest.IsZero() && now.Before(newest.Add(-clockSlack)):
		return fail(name, fmt.Sprintf("the clock reads %s, %s before the newest time in the database (%s): it went backwards, and new records would sort before old ones",
			stamp(now), newest.Sub(now).Round(time.Second), stamp(newest)), fix)
	case !built.IsZero() && now.Before(built.Add(-clockSlack)):
		return fail(name, fmt.Sprintf("the clock reads %s, %s before this build's source was committed (%s)",
			stamp(now), built.Sub(now).Round(time.Second), stamp(built)), fix)
	case newest.IsZero():
		return ok(name, fmt.Sprintf("the clock reads %s (nothing recorded yet to compare with)", stamp(now)))
	}
	return ok(name, fmt.Sprintf("the clock reads %s, not before the newest time in the database (%s)", stamp(now), stamp(newest)))
}

func stamp(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// Newest reads the newest recorded time of the database at path with
// newest, read-only; a database not created yet has none (zero, nil).
func Newest(ctx context.Context, path string, migrations []sqlitedb.Migration, newest func(context.Context, *sql.DB) (time.Time, error)) (time.Time, error) {
	db, err := sqlitedb.OpenReadOnly(ctx, path, sqlitedb.LatestVersion(migrations), 2*time.Second)
	if errs.Is(err, errs.NotFound) {
		return time.Time{}, nil
	}
	if err != nil {
		return time.Time{}, err
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	t, err := newest(ctx, db)
	if err != nil {
		return time.Time{}, errs.Wrap(errs.Storage, err, "cannot read the newest time in %s", path)
	}
	return t, nil
}

// ClockAt is Clock for the program's database at path and the running
// binary's commit time. A database it cannot read is a warning: the clock
// is then compared with nothing, and `status` says what is wrong with it.
func ClockAt(ctx context.Context, program string, now time.Time, path string, migrations []sqlitedb.Migration,
	newest func(context.Context, *sql.DB) (time.Time, error)) Check {
	t, err := Newest(ctx, path, migrations, newest)
	if err != nil {
		return warn("clock", err.Error(), fmt.Sprintf("see `%s status` for the database", program))
	}
	return Clock(now, t, buildinfo.CommitTime())
}
