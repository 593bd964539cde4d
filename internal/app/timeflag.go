package app

import (
	"strconv"
	"strings"
	"time"

	"github.com/dustin/go-humanize"
)

// relativeUnits are the units of a relative time like 7d.
var relativeUnits = map[byte]time.Duration{
	's': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour, 'w': 7 * 24 * time.Hour,
}

// ParseTime reads a point in time for a flag: a duration ago (7d, 12h, 30m,
// 2w, 90s, or a Go duration like 1h30m), an RFC 3339 time, or a local date
// (2026-11-30) or date and time (2026-11-30 14:00, 2026-11-30T14:00:05).
func ParseTime(flag, s string, now time.Time) (time.Time, error) {
	s = strings.TrimSpace(s)
	if n := len(s); n >= 2 {
		if unit, ok := relativeUnits[s[n-1]]; ok {
			if v, err := strconv.ParseUint(s[:n-1], 10, 31); err == nil {
				return now.Add(-time.Duration(v) * unit), nil
			}
		}
	}
	if d, err := time.ParseDuration(s); err == nil && d >= 0 {
		return now.Add(-d), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return t, nil
	}
	for _, layout := range []string{time.DateOnly, "2006-01-02 15:04", time.DateTime, "2006-01-02T15:04", "2006-01-02T15:04:05"} {
		if t, err := time.ParseInLocation(layout, s, now.Location()); err == nil {
			return t, nil
		}
	}
	return time.Time{}, UsageError("--%s %q is not a time: give a duration ago (7d, 12h, 30m) or a date (2026-11-30, 2026-11-30 14:00, RFC 3339)", flag, s)
}

// ParseSize reads a size for a flag: 100MB, 1.5GiB, 500kB, 2000000.
// MB is 1000*1000 bytes, as the history advisory counts; MiB is 1024*1024.
func ParseSize(flag, s string) (int64, error) {
	n, err := humanize.ParseBytes(s)
	if err != nil || n == 0 || n > 1<<62 {
		return 0, UsageError("--%s %q is not a size: give bytes with a unit, like 100MB or 2GiB", flag, s)
	}
	return int64(n), nil
}
