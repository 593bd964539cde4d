package main

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// The agent is what each demo window runs under tamq's PTY broker. It stands in
// for a coding agent: it reads the messages tamq types into its terminal and
// answers some of them by printing a To: block, which the broker routes.
//
// The conversation is a relay: a message carrying "(hops left: N, route: …)"
// is passed on to the next repo of the ring with N-1; the agent that receives
// N = 0 thanks its sender once with a summary, and that summary carries no
// count, so nobody answers it. The operator's "hops left: 3" therefore makes
// exactly five messages.

// batonRE finds the relay's count and the route so far in a message.
var batonRE = regexp.MustCompile(`\(hops left: (\d+)(?:, route: ([^)]*))?\)`)

// Bracketed paste markers: tamq brackets a delivery only when the program asked
// for it, which this one never does; they are dropped anyway, in case.
var pasteMarkers = strings.NewReplacer("\x1b[200~", "", "\x1b[201~", "")

// runAgent answers messages read from in until in ends. self is this window's
// repo, ring the demo's repos in relay order.
func runAgent(in io.Reader, out io.Writer, self string, ring []string) error {
	i := slices.Index(ring, self)
	if i < 0 {
		return fmt.Errorf("repo %q is not one of %s", self, strings.Join(ring, ", "))
	}
	next := ring[(i+1)%len(ring)]
	// Nothing the agent prints starts with "To:" except its answers: the broker
	// would route any such line.
	fmt.Fprintf(out, "%s's demo agent: I pass relay batons on to %s. Waiting for messages...\n\n", self, next)
	r := bufio.NewReader(in)
	for {
		line, err := r.ReadString('\n')
		if line != "" {
			answer(out, self, next, ring, line)
		}
		if err != nil {
			// The terminal went away (the window closed): that is the end.
			return nil
		}
	}
}

// answer handles one line of input. The terminal is in its default cooked
// mode: a delivery arrives as one line, since tamq's CR after the text becomes
// the newline. Lines that are not a delivery (someone typing) are ignored.
func answer(out io.Writer, self, next string, ring []string, line string) {
	line = strings.TrimRight(pasteMarkers.Replace(line), "\r\n")
	rest, ok := strings.CutPrefix(strings.TrimLeft(line, " "), "From:")
	if !ok {
		return
	}
	sender, body, ok := strings.Cut(rest, ": ")
	if !ok {
		return
	}
	sender, operator := strings.CutSuffix(sender, "/o")
	m := batonRE.FindStringSubmatch(body)
	if m == nil {
		fmt.Fprintf(out, "%s: noted, nothing to answer.\n\n", self)
		return
	}
	hops, err := strconv.Atoi(m[1])
	if err != nil {
		fmt.Fprintf(out, "%s: that hop count is too big for me.\n\n", self)
		return
	}
	var route []string
	if m[2] != "" {
		route = strings.Split(m[2], " > ")
	}
	route = append(route, self)
	if hops > 0 {
		fmt.Fprintf(out, "%s: got the baton from %s, passing it on to %s.\n", self, sender, next)
		fmt.Fprintf(out, "To:%s: Relay baton from %s, please pass it on (hops left: %d, route: %s)\n\n",
			next, self, hops-1, strings.Join(route, " > "))
		return
	}
	where := "is back with"
	if route[0] != self {
		where = "ended with" // the relay did not start here
	}
	summary := fmt.Sprintf("the baton %s %s after %d hops (%s). Relay complete!",
		where, self, len(route)-1, strings.Join(route, " > "))
	// The summary goes back to the repo that handed the baton over; an operator
	// is not a repo, so it only gets the line on the screen.
	if operator || sender == self || !slices.Contains(ring, sender) {
		fmt.Fprintf(out, "%s: %s\n\n", self, summary)
		return
	}
	fmt.Fprintf(out, "%s: the relay is done, telling %s.\n", self, sender)
	fmt.Fprintf(out, "To:%s: Thanks %s, %s\n\n", sender, sender, summary)
}

// agentMain is `tamq-demo agent REPO...`: the repos are the ring, and the
// broker tells the agent which one it is in TAMQ_REPO.
func agentMain(args []string) int {
	self := os.Getenv("TAMQ_REPO")
	if self == "" || len(args) == 0 {
		fmt.Fprintln(os.Stderr, "usage: TAMQ_REPO=REPO tamq-demo agent REPO... (tamq's broker sets TAMQ_REPO)")
		return 2
	}
	if err := runAgent(os.Stdin, os.Stdout, self, args); err != nil {
		fmt.Fprintln(os.Stderr, "tamq-demo agent:", err)
		return 1
	}
	return 0
}
