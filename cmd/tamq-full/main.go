// Command tamq-full is the whole of tamq (internal/tamq/cli). People run it
// as `tamq`: the front program (cmd/tamq) runs send and ping itself, for
// speed, and hands every other command line to this one.
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/cli"
)

func main() { os.Exit(cli.Main()) }
