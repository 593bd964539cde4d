package clock

import (
	"testing"
	"time"
)

func TestFakeFiresWaitsInOrderWhenAdvanced(t *testing.T) {
	start := time.Date(2026, 12, 5, 10, 0, 0, 0, time.UTC)
	f := NewFake(start)
	late, early := f.After(2*time.Second), f.After(time.Second)
	select {
	case <-early:
		t.Fatal("fired before the clock moved")
	default:
	}
	f.Advance(time.Second)
	if got := <-early; !got.Equal(start.Add(time.Second)) {
		t.Errorf("early fired at %v", got)
	}
	select {
	case <-late:
		t.Fatal("late fired a second early")
	default:
	}
	f.Advance(time.Second)
	<-late
	if n, _ := f.Waiting(); n != 0 {
		t.Errorf("%d waits left", n)
	}
	if !f.Now().Equal(start.Add(2 * time.Second)) {
		t.Errorf("now %v", f.Now())
	}
}

func TestFakeBlockUntilSeesAWaitAddedLater(t *testing.T) {
	f := NewFake(time.Unix(0, 0))
	go func() { <-f.After(time.Minute) }()
	if !f.BlockUntil(1, nil) {
		t.Fatal("BlockUntil gave up")
	}
	done := make(chan struct{})
	close(done)
	if f.BlockUntil(2, done) {
		t.Error("BlockUntil(2) returned true with one wait")
	}
	f.Advance(time.Minute)
}

func TestSystemIsUTCToTheMillisecond(t *testing.T) {
	now := System.Now()
	if now.Location() != time.UTC || now.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("System.Now() = %v", now)
	}
	if d := <-System.After(0); d.IsZero() {
		t.Error("After(0) gave the zero time")
	}
}
