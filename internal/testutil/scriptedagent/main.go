// Command scriptedagent stands in for a coding agent in the end-to-end tests
// of the wake loop: internal/agentsim, configured from the environment.
//
//	SCRIPTED_AGENT_PLAN             the part per wake (agentsim's plan words)
//	SCRIPTED_AGENT_LOG              a file that receives agentsim's event lines
//	SCRIPTED_AGENT_PUBLISH          set: a completed wake marks its task done (its
//	                                message read) through the engine
//	SCRIPTED_AGENT_DIALOG           a file: a dialog shows while it exists
//	SCRIPTED_AGENT_BUSY             a file: the agent says it is at work while
//	                                it exists (tamq holds deliveries)
//	SCRIPTED_AGENT_HOLD             a file: the work part works while it exists
//	SCRIPTED_AGENT_WRAP             columns: show every line read re-wrapped at
//	                                that width, as a TUI shows the user's prompt
//	SCRIPTED_AGENT_SAY              a line the agent prints as its own after
//	                                each message it shows (with WRAP)
package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/tmux-amq/tamq/internal/agentsim"
)

func main() {
	wrap, _ := strconv.Atoi(os.Getenv("SCRIPTED_AGENT_WRAP"))
	agentsim.Run(os.Stdin, os.Stdout, agentsim.Config{
		Plan:    strings.Fields(os.Getenv("SCRIPTED_AGENT_PLAN")),
		Engine:  engine(),
		Publish: os.Getenv("SCRIPTED_AGENT_PUBLISH") != "",
		Dialog:  os.Getenv("SCRIPTED_AGENT_DIALOG"),
		Busy:    os.Getenv("SCRIPTED_AGENT_BUSY"),
		Hold:    os.Getenv("SCRIPTED_AGENT_HOLD"),
		Wrap:    wrap,
		Say:     os.Getenv("SCRIPTED_AGENT_SAY"),
		Log: func(format string, args ...any) {
			path := os.Getenv("SCRIPTED_AGENT_LOG")
			if path == "" {
				return
			}
			if f, err := os.OpenFile(path, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o600); err == nil {
				fmt.Fprintf(f, format+"\n", args...)
				f.Close()
			}
		},
	})
}

// engine is the coordination-engine beside this program (the tests build
// them into one directory), else the one on PATH.
func engine() string {
	if exe, err := os.Executable(); err == nil {
		sibling := filepath.Join(filepath.Dir(exe), "coordination-engine")
		if _, err := os.Stat(sibling); err == nil {
			return sibling
		}
	}
	return "coordination-engine"
}
