// Command tamq is tmux agentic message queueing; see internal/tamq/cli.
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/cli"
)

func main() { os.Exit(cli.Main()) }
