// Package ackmode names when a tamq delivery counts as done (spec section 5).
// tamq's queue records a mode with every message and the configuration picks
// the default one; it is a leaf package so both can use the one definition
// without the configuration depending on tamq's packages.
package ackmode

import "fmt"

// Mode is when a message counts as delivered.
type Mode string

const (
	// Injected: delivered once the bytes were written to the terminal.
	Injected Mode = "injected"
	// Acknowledged: delivered once the receiver runs `tamq ack ID`; until
	// then the same id is redelivered after each deadline.
	Acknowledged Mode = "acknowledged"
)

// Names lists the modes as their names, for messages and completion.
func Names() []string { return []string{string(Injected), string(Acknowledged)} }

// Parse checks that s names a mode.
func Parse(s string) (Mode, error) {
	if m := Mode(s); m == Injected || m == Acknowledged {
		return m, nil
	}
	return "", fmt.Errorf("%q is not %s or %s", s, Injected, Acknowledged)
}
