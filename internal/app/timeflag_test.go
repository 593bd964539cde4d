package app

import (
	"testing"
	"time"
)

func TestParseTime(t *testing.T) {
	now := time.Date(2026, 12, 2, 15, 0, 0, 0, time.UTC)
	for in, want := range map[string]time.Time{
		"7d":                   now.AddDate(0, 0, -7),
		"2w":                   now.AddDate(0, 0, -14),
		"12h":                  now.Add(-12 * time.Hour),
		"30m":                  now.Add(-30 * time.Minute),
		"90s":                  now.Add(-90 * time.Second),
		"1h30m":                now.Add(-90 * time.Minute),
		"0s":                   now,
		"2026-11-30":           time.Date(2026, 11, 30, 0, 0, 0, 0, time.UTC),
		"2026-11-30 14:05":     time.Date(2026, 11, 30, 14, 5, 0, 0, time.UTC),
		"2026-11-30T14:05:06":  time.Date(2026, 11, 30, 14, 5, 6, 0, time.UTC),
		"2026-11-30T14:05:06Z": time.Date(2026, 11, 30, 14, 5, 6, 0, time.UTC),
	} {
		got, err := ParseTime("since", in, now)
		if err != nil || !got.Equal(want) {
			t.Errorf("%q: %v %v, want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "yesterday", "7x", "-3d", "2026-13-01", "d"} {
		if _, err := ParseTime("since", bad, now); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int64{"100MB": 100_000_000, "2GiB": 2 << 30, "1B": 1, "500kB": 500_000, "1.5 MB": 1_500_000} {
		if got, err := ParseSize("max-size", in); err != nil || got != want {
			t.Errorf("%q: %d %v, want %d", in, got, err, want)
		}
	}
	for _, bad := range []string{"", "lots", "0", "-5MB"} {
		if _, err := ParseSize("max-size", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
}
