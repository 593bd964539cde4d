//go:build trackers

package beads_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"

	"github.com/tmux-amq/tamq/internal/statehub"
	"github.com/tmux-amq/tamq/internal/statehub/hubtest"
)

// A write that lands while the driver's bd list runs (a person's `bd close`
// just after bd read the database; here the shim makes it so) is read at
// the next look: the stamp the read answers for is the one before it.
func TestAWriteDuringAReadIsReadNextTime(t *testing.T) {
	w := newWorld(t, "alpha")
	id := w.AddTask(t, "alpha", hubtest.Task{Title: "A"})
	_, bdID := w.split(t, id)
	d := w.driver(t)
	ctx := context.Background()
	if _, err := d.Board(ctx); err != nil {
		t.Fatal(err)
	}
	trigger := filepath.Join(t.TempDir(), "trigger")
	shim := "#!/bin/sh\necho run >> '" + w.count + "'\n" +
		"if [ \"$1\" = list ] && [ -e '" + trigger + "' ]; then rm '" + trigger + "'; out=$('" + w.bd + "' \"$@\"); '" + w.bd + "' close " + bdID + " --reason r >/dev/null 2>&1; printf '%s\\n' \"$out\"; exit 0; fi\n" +
		"exec '" + w.bd + "' \"$@\"\n"
	if err := os.WriteFile(w.shim, []byte(shim), 0o700); err != nil {
		t.Fatal(err)
	}
	w.AddTask(t, "alpha", hubtest.Task{Title: "C"}) // a change: the next look reads
	os.WriteFile(trigger, nil, 0o600)
	b, err := d.Board(ctx)
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("after the racing read: %s", status(b, id))
	if w.Read(t, id).Status != "done" {
		t.Fatal("the close did not happen")
	}
	b, err = d.Board(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if s := status(b, id); s != "done" {
		t.Errorf("a look after the close still says %s is %s (bd runs: %d)", id, s, w.Charged())
	}
}

func status(b statehub.Board, id string) string {
	for _, wp := range b.Workplans {
		for _, t := range wp.Tasks {
			if t.ID == id {
				return t.Status
			}
		}
	}
	return "absent"
}
