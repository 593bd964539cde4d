// Command tamq is tmux agentic message queueing: the service and its command
// line, one cobra command per file (internal/tamq/cli).
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/cli"
)

func main() { os.Exit(cli.Main()) }
