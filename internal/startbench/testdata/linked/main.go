// Command linked links all of tamq, runs every package initialisation, and
// exits before doing anything: what any tamq command pays before its own
// work. The start benchmark builds it beside tamq to show that floor.
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/cli"
)

func main() {
	// Never true when the benchmark runs it; the call keeps the whole program
	// linked, as it is in tamq (an unreferenced package would be trimmed).
	if len(os.Args) > 1 && os.Args[1] == "--run-tamq" {
		os.Args = os.Args[1:]
		os.Exit(cli.Main())
	}
}
