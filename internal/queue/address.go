package queue

import (
	"strings"

	"github.com/tmux-amq/tamq/internal/errs"
)

// AddressPrefix starts every address: "To:<repo>: text".
const AddressPrefix = "To:"

// Address is what an addressed text says.
type Address struct {
	// Target is the repo addressed: the longest registered slug that follows
	// "To:" and is itself followed by ':'. When no registered slug is (Known
	// is false), it is the slug as written, up to its first ':'.
	Target string
	Known  bool
	// Body is the text after the target's ':', less one space.
	Body string
}

// ReadAddress decides which repo text addresses; it is the one place that
// does, for sends, the agents' blocks and the operator's typed lines alike.
// Slugs may contain spaces, commas and colons, so the address is matched
// against the registered slugs (the longest match wins), never split on a
// character. ok is false when text does not start with "To:" (an indented
// address is the caller's to allow, by trimming first).
func ReadAddress(text string, slugs []string) (a Address, ok bool) {
	rest, ok := strings.CutPrefix(text, AddressPrefix)
	if !ok {
		return Address{}, false
	}
	for _, s := range slugs {
		if len(s) > len(a.Target) && strings.HasPrefix(rest, s+":") {
			a.Target, a.Known = s, true
		}
	}
	if !a.Known {
		// Written as far as its first ':', within the first line: that is
		// what a person reads as the target.
		a.Target, _, _ = strings.Cut(rest, ":")
		if nl := strings.IndexByte(a.Target, '\n'); nl >= 0 {
			a.Target = a.Target[:nl]
		}
	}
	rest = strings.TrimPrefix(rest[len(a.Target):], ":")
	a.Body = strings.TrimPrefix(rest, " ")
	return a, true
}

// CouldBeAddress reports whether typed, the start of a line still being
// typed key by key, is an address to a registered slug or may still grow
// into one: the operator's input filter holds keys back only while it is.
func CouldBeAddress(typed string, slugs []string) bool {
	if len(typed) <= len(AddressPrefix) {
		return strings.HasPrefix(AddressPrefix, typed)
	}
	rest, ok := strings.CutPrefix(typed, AddressPrefix)
	if !ok {
		return false
	}
	for _, s := range slugs {
		if strings.HasPrefix(s+":", rest) || strings.HasPrefix(rest, s+":") {
			return true
		}
	}
	return false
}

// FormatAddress writes the address ReadAddress reads back.
func FormatAddress(target, body string) string {
	return AddressPrefix + target + ": " + body
}

// ParseAddress splits "To:<slug>: text" into the target slug and the body,
// with the errors a send answers: Usage when text is no address,
// UnknownTarget when it names no registered slug.
func ParseAddress(text string, slugs []string) (target, body string, err error) {
	a, ok := ReadAddress(text, slugs)
	if !ok {
		return "", "", errs.New(errs.Usage, "a message must start with 'To:<repo>: ' (got %q)", preview(text))
	}
	if !a.Known {
		return "", "", errs.New(errs.UnknownTarget, "unknown target '%s': not in the gita registry (see `gita ls`)", a.Target)
	}
	return a.Target, a.Body, nil
}

// AddressedSlug is the slug an address names as written, up to its first ':'
// (for messages about addresses that match no registered slug).
func AddressedSlug(text string) string {
	a, _ := ReadAddress(text, nil)
	return a.Target
}

func preview(s string) string {
	if len(s) > 40 {
		return s[:40] + "…"
	}
	return s
}
