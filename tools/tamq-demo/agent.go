package main

import (
	"fmt"
	"os"
	"path/filepath"

	"github.com/tmux-amq/tamq/internal/agentsim"
)

// What each demo window runs under tamq's PTY broker: a scripted stand-in
// for a coding agent (internal/agentsim). It reads its wake prompts from the
// terminal, acknowledges, checkpoints, marks its task done (or its message
// read) in State Hub and releases; it answers a message's sender with a To:
// line, which the broker routes. beta's agent stalls on its first wake, so
// its lease runs out and it is woken again with its checkpoint.

// The environment the demo gives the windows.
const (
	agentEngineVar = "TAMQ_DEMO_ENGINE" // the coordination-engine binary
	agentHoldVar   = "TAMQ_DEMO_HOLD"   // the directory of the hold files
)

// plans are the parts the agents play, by repo (internal/agentsim says what
// each word does); the rest complete every wake. The kept loop's agents
// (keep.go) fail and quit, fail every time, ask for a permission, and work
// until their hold file is removed.
var plans = map[string][]string{
	"beta":    {"ackstall", "complete"},
	"epsilon": {"failquit"},
	"zeta":    {"fail"},
	"eta":     {"workask"},
	"theta":   {"work"},
}

// agentMain is `tamq-demo agent`: the broker says which repo it is in
// TAMQ_REPO.
func agentMain(args []string) int {
	self := os.Getenv("TAMQ_REPO")
	engine := os.Getenv(agentEngineVar)
	if self == "" || engine == "" || len(args) > 0 {
		fmt.Fprintf(os.Stderr, "usage: TAMQ_REPO=REPO %s=PATH tamq-demo agent (the demo sets them)\n", agentEngineVar)
		return 2
	}
	hold := ""
	if dir := os.Getenv(agentHoldVar); dir != "" {
		hold = filepath.Join(dir, self)
	}
	fmt.Printf("%s's demo agent: I wait for coordination-engine's wake prompts.\n", self)
	agentsim.Run(os.Stdin, os.Stdout, agentsim.Config{
		Plan: plans[self], Engine: engine, Publish: true, Reply: true,
		Hold: hold,
		// What it does shows in its window.
		Log: func(format string, args ...any) { fmt.Printf("  · "+format+"\n", args...) },
	})
	return 0
}
