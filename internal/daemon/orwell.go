package daemon

import (
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
)

// The log sinks of a service: in the foreground its log goes to stderr; a
// detached service's stderr is its state directory's log file (the launcher
// sets that up), which the service rotates by size (logfile.go); --orwell
// adds a private file of its own for what the log never holds (message
// bodies, whole frames).

// OpenOrwell checks that the policy profile allows --orwell, warns on warn,
// and opens the private sink (0600, in the 0700 state directory). What goes
// there goes nowhere else: never to the log, never to State Hub.
func OpenOrwell(p paths.Paths, profile string, prof policy.Profile, ref string, warn io.Writer) (io.WriteCloser, error) {
	if !prof.Allows(policy.OrwellDiagnostics) {
		return nil, errs.New(errs.PolicyRefused, "--orwell is refused by policy profile %s", ref).
			WithHint("it needs a non-production profile whose allow list has %q (profile %q has not)", policy.OrwellDiagnostics, profile)
	}
	if err := paths.EnsurePrivateDir(p.StateDir); err != nil {
		return nil, err
	}
	sink, err := os.OpenFile(p.OrwellLog, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, errs.Wrap(errs.Storage, err, "cannot open the orwell sink")
	}
	if err := sink.Chmod(0o600); err != nil {
		sink.Close()
		return nil, errs.Wrap(errs.Storage, err, "cannot make %s private", p.OrwellLog)
	}
	fmt.Fprintf(warn, "%[1]s: WARNING: --orwell is on. Message bodies and other fields that are normally\n"+
		"%[1]s: WARNING: omitted are written to %[2]s (mode 0600).\n"+
		"%[1]s: WARNING: Not for production use; delete that file after diagnosis.\n", p.Program, p.OrwellLog)
	return sink, nil
}

// OrwellTracer writes every frame in and out, in full, with its time: the
// protocol server's Trace under --orwell.
func OrwellTracer(w io.Writer, now func() time.Time) func(direction string, frame []byte) {
	var mu sync.Mutex
	return func(direction string, frame []byte) {
		mu.Lock()
		defer mu.Unlock()
		fmt.Fprintf(w, "%s %s %s\n", now().UTC().Format(time.RFC3339Nano), direction, frame)
	}
}
