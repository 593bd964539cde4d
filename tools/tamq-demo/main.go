// Command tamq-demo is the first-run demo behind `make demo`: the loop of
// the whole system. It sets up a throwaway gita registry, the reference
// State Hub with a small workplan, a private tmux server, tamq and
// coordination-engine, and three repo windows whose agents are scripted;
// State Hub's changes wake them, and it prints what happened as a timeline.
// Everything it started is gone when it exits, unless --keep.
//
//	tamq-demo [--tamq PATH] [--engine PATH] [--keep] [--timeout DURATION]
//	tamq-demo agent    (what each demo window runs)
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"syscall"
	"time"
)

func main() {
	if len(os.Args) > 1 && os.Args[1] == "agent" {
		os.Exit(agentMain(os.Args[2:]))
	}
	os.Exit(driverMain(os.Args[1:], os.Stdout, os.Stderr))
}

// driverMain runs the demo and returns the exit status: 0, 1 on failure,
// 2 on bad usage, 130 when interrupted.
func driverMain(args []string, stdout, stderr io.Writer) int {
	fs := flag.NewFlagSet("tamq-demo", flag.ContinueOnError)
	fs.SetOutput(stderr)
	var o options
	fs.StringVar(&o.tamq, "tamq", "", "the tamq binary to demonstrate (default: bin/tamq, else tamq in PATH)")
	fs.StringVar(&o.engine, "engine", "", "the coordination-engine binary (default: beside tamq, else in PATH)")
	fs.BoolVar(&o.keep, "keep", false, "leave the tmux server, the service and the demo's files for you to look at")
	fs.DurationVar(&o.timeout, "timeout", 60*time.Second, "give up when the demo has not finished by then")
	fs.Usage = func() {
		fmt.Fprintln(stderr, "usage: tamq-demo [--tamq PATH] [--engine PATH] [--keep] [--timeout DURATION]")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			return 0
		}
		return 2
	}
	if fs.NArg() > 0 {
		fmt.Fprintf(stderr, "tamq-demo: unexpected argument %q\n", fs.Arg(0))
		fs.Usage()
		return 2
	}
	if o.tamq == "" {
		o.tamq = defaultTamq()
	}
	if o.tamq == "" {
		fmt.Fprintln(stderr, "tamq-demo: no tamq binary: run `make build` or pass --tamq PATH")
		return 1
	}
	if o.engine == "" {
		o.engine = defaultEngine(o.tamq)
	}
	if o.engine == "" {
		fmt.Fprintln(stderr, "tamq-demo: no coordination-engine binary: run `make build` or pass --engine PATH")
		return 1
	}

	// Ctrl-C, SIGTERM or a closed terminal stops the demo, which then cleans
	// up as on any failure. Later signals are swallowed until cleanup is done,
	// so a second Ctrl-C cannot leave the service or the tmux server behind.
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM, syscall.SIGHUP)
	defer stop()
	// Output into a closed pipe (`make demo | head`) must not kill the demo
	// before it has cleaned up: with SIGPIPE caught, such a write only fails.
	// (Caught, not ignored: an ignored signal would stay ignored in every
	// program the demo starts.)
	signal.Notify(make(chan os.Signal, 1), syscall.SIGPIPE)
	err := run(ctx, o, stdout, stderr)
	switch {
	case err != nil && ctx.Err() != nil:
		fmt.Fprintln(stderr, "tamq-demo: interrupted")
		return 130
	case err != nil:
		fmt.Fprintln(stderr, "tamq-demo: FAILED:", err)
		return 1
	}
	return 0
}

// defaultTamq is bin/tamq when run from the repository (as `make demo` does),
// else tamq from PATH.
func defaultTamq() string {
	if st, err := os.Stat("bin/tamq"); err == nil && !st.IsDir() {
		return "bin/tamq"
	}
	if p, err := exec.LookPath("tamq"); err == nil {
		return p
	}
	return ""
}

// defaultEngine is the coordination-engine beside tamq (bin/), else the one
// in PATH.
func defaultEngine(tamq string) string {
	beside := filepath.Join(filepath.Dir(tamq), "coordination-engine")
	if st, err := os.Stat(beside); err == nil && !st.IsDir() {
		return beside
	}
	if p, err := exec.LookPath("coordination-engine"); err == nil {
		return p
	}
	return ""
}
