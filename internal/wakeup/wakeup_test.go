package wakeup

import "testing"

// Many wakes before a look are one wake, and a wake never blocks.
func TestWakesBeforeALookAreOne(t *testing.T) {
	s := New()
	for range 3 {
		s.Wake()
	}
	select {
	case <-s.C():
	default:
		t.Fatal("no wake pending after three")
	}
	select {
	case <-s.C():
		t.Fatal("a second wake pending after three before one look")
	default:
	}
}
