package sqlitedb

import (
	"context"
	"database/sql"
	"time"
)

// Both programs keep times as Unix milliseconds in UTC, unset values as
// NULL; these are the one spelling of that for their queries.

// Millis is t as stored.
func Millis(t time.Time) int64 { return t.UnixMilli() }

// FromMillis is a stored time read back, in UTC.
func FromMillis(v int64) time.Time { return time.UnixMilli(v).UTC() }

// NullMillis stores the zero time as NULL; TimeOrZero reads it back (with
// COALESCE(column, 0) in the query).
func NullMillis(t time.Time) any {
	if t.IsZero() {
		return nil
	}
	return Millis(t)
}

// TimeOrZero is a stored time read back, the zero time for 0 (NULL).
func TimeOrZero(v int64) time.Time {
	if v == 0 {
		return time.Time{}
	}
	return FromMillis(v)
}

// NullString stores the empty string as NULL.
func NullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// NewestTime runs query, which selects one time in milliseconds or NULL (a
// max over the tables a program writes), and returns it, the zero time for
// NULL: a program's clock that reads earlier has gone backwards.
func NewestTime(ctx context.Context, db *sql.DB, query string) (time.Time, error) {
	var newest sql.NullInt64
	if err := db.QueryRowContext(ctx, query).Scan(&newest); err != nil || !newest.Valid {
		return time.Time{}, err
	}
	return FromMillis(newest.Int64), nil
}
