package service

import (
	"context"
	"os"
	"testing"

	"github.com/tmux-amq/tamq/internal/door"
	"github.com/tmux-amq/tamq/internal/proc"
)

// BenchmarkPlaceACaller is what deriving a caller costs on a request from a
// process not seen in the last second (each `tamq send` is one): the walk
// up the process tree the sender lookup always made (baseline), and the
// whole placement the door policy makes of a process in no window (the
// tree, the environment, the ancestors' command lines).
func BenchmarkPlaceACaller(b *testing.B) {
	svc, _, _ := inProcessService(b, b.TempDir(), Options{Writer: discardWriter{}})
	ctx, pid := context.Background(), int32(os.Getpid())
	b.Run("ancestors only (before)", func(b *testing.B) {
		for b.Loop() {
			if _, err := proc.Ancestors(int(pid)); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("placed", func(b *testing.B) {
		for b.Loop() {
			clear(svc.callers.senders) // as a new process would be
			if c, _, _ := svc.callers.place(ctx, pid); c.Kind != door.Operator {
				b.Fatalf("the benchmark's process is %+v", c)
			}
		}
	})
}
