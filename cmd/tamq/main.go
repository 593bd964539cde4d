// Command tamq is tmux agentic message queueing. This is its front program
// (internal/tamq/front): it runs `tamq send` and `tamq ping`, which agents pay
// a process start for on every message, without loading the rest of tamq, and
// hands every other command line to tamq-full beside it.
package main

import (
	"os"

	"github.com/tmux-amq/tamq/internal/tamq/front"
)

func main() { os.Exit(front.Main(os.Args[1:])) }
