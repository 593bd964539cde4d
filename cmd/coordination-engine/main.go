// Command coordination-engine wakes repository agents through tamq; see internal/engine/cli.
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/engine/cli"
)

func main() { os.Exit(cli.Main()) }
