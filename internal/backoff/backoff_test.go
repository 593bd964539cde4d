package backoff

import (
	"testing"
	"time"
)

func TestNextDoublesFromMinToMax(t *testing.T) {
	p := Policy{Min: time.Second, Max: 5 * time.Second}
	var got []time.Duration
	d := time.Duration(0)
	for range 5 {
		d = p.Next(d)
		got = append(got, d)
	}
	want := []time.Duration{time.Second, 2 * time.Second, 4 * time.Second, 5 * time.Second, 5 * time.Second}
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("waits %v, want %v", got, want)
		}
	}
}

func TestJitterStaysWithinAFifth(t *testing.T) {
	d := 10 * time.Second
	lo, hi := d, time.Duration(0)
	for range 2000 {
		j := Jitter(d)
		lo, hi = min(lo, j), max(hi, j)
	}
	if lo < 8*time.Second || hi > 12*time.Second {
		t.Errorf("jitter of %v ranged %v..%v, want within 8s..12s", d, lo, hi)
	}
	if lo == hi {
		t.Errorf("jitter of %v never varied", d)
	}
	if Jitter(0) != 0 {
		t.Error("Jitter(0) != 0")
	}
}
