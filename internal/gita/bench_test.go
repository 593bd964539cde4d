package gita

import (
	"fmt"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// BenchmarkWatched reads a registry of 20 repositories as the service reads
// it for every send (Watched), against Load in the same run, which checks
// every registered path each time (two stats each).
func BenchmarkWatched(b *testing.B) {
	dir, src := setup(b)
	var csv strings.Builder
	for i := range 20 {
		repo := filepath.Join(src, fmt.Sprintf("r%02d", i))
		fakeRepo(b, repo)
		fmt.Fprintf(&csv, "%s,r%02d,,\r\n", repo, i)
	}
	writeFile(b, filepath.Join(dir, ReposFileName), csv.String())
	// Past the racy window, a file just written is read again on every call:
	// the reader's clock runs that far ahead.
	rd := NewReader(dir)
	rd.now = func() time.Time { return time.Now().Add(racyWindow) }
	timeOf := func(load func() (*Registry, error)) time.Duration {
		start := time.Now()
		for range b.N {
			if _, err := load(); err != nil {
				b.Fatal(err)
			}
		}
		return time.Since(start) / time.Duration(b.N)
	}
	b.ResetTimer()
	load, watched := timeOf(rd.Load), timeOf(rd.Watched)
	b.ReportMetric(float64(load.Nanoseconds()), "load-ns/op")
	b.ReportMetric(float64(watched.Nanoseconds()), "watched-ns/op")
	b.ReportMetric(float64(watched)/float64(load), "ratio-to-load")
}
