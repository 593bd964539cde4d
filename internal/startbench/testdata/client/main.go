// Command client is the least a tamq ping or send can be: the same client
// package and socket round trip, without the rest of tamq linked. The start
// benchmark runs it to show what a separate small command-line binary would
// cost (docs/performance.md).
package main

import (
	"context"
	"os"

	"github.com/tmux-amq/tamq/internal/daemon"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/tamq/api"
	"github.com/tmux-amq/tamq/internal/tamq/client"
)

// client ping | client send TEXT
func main() {
	p, err := paths.Resolve(paths.Tamq, os.Getenv)
	if err == nil {
		if os.Args[1] == "send" {
			_, err = client.New(p).Send(context.Background(), api.SendArgs{Text: os.Args[2]})
		} else {
			_, err = daemon.Ping(context.Background(), p)
		}
	}
	if err != nil {
		os.Stderr.WriteString(err.Error() + "\n")
		os.Exit(1)
	}
}
