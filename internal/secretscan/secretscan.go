// Package secretscan looks for secret material in text about to be written
// into an agent's terminal or kept by the engine: a continuation prompt
// carries checkpoint text and tracker titles, a message body is shown to an
// agent, and a release reason or a checkpoint goes into the engine's
// database and receipts. A key in any of them must be held back rather than
// travel on into a terminal, its scrollback, tamq's history or State Hub.
// It is pure.
//
// It finds keys by a table of rules ported from gitleaks (rules.go), a
// secret assignment rule (NAME=VALUE with a secret word in NAME), and an
// entropy check of long base64 and hex runs (entropy.go), on the text in
// NFKC form (normalize.go).
//
// A Finding names the rule and the byte offset, never the matched text, so
// reporting a hit (in an error, a receipt or a log) cannot leak the secret.
package secretscan

import (
	"fmt"
	"regexp"
	"strings"
	"sync"
)

// Finding is where a secret was found: the rule that matched and the byte
// offset of the match. It deliberately has no field for the matched text.
type Finding struct {
	Rule   string
	Offset int
}

// String shows the rule and offset only.
func (f Finding) String() string { return fmt.Sprintf("%s at byte %d", f.Rule, f.Offset) }

// compiled holds the rules' regexps, compiled on the first scan so that a
// command that never scans does not pay for them at start-up.
var compiled = sync.OnceValue(func() []compiledRule {
	res := make([]compiledRule, len(rules))
	for i, r := range rules {
		res[i].re = regexp.MustCompile(r.pattern)
		if r.allow != "" {
			res[i].allow = regexp.MustCompile(r.allow)
		}
	}
	return res
})

type compiledRule struct{ re, allow *regexp.Regexp }

// Scan reports the first secret in text, or false when there is none. The
// text is scanned in NFKC form without format characters, so a fullwidth
// "ＰＡＳＳＷＯＲＤ＝" or a zero-width space inside a token hides nothing; the
// offset is still a byte offset into text.
func Scan(text string) (Finding, bool) {
	norm, back := normalize(text)
	f, ok := scan(norm)
	if ok {
		f.Offset = back(f.Offset)
	}
	return f, ok
}

// scan is Scan on normalized text.
func scan(text string) (Finding, bool) {
	best := Finding{Offset: -1}
	better := func(at int) bool { return best.Offset < 0 || at < best.Offset }
	present := keywordsIn(text)
	for i, r := range rules {
		if !present[i] {
			continue
		}
		if at, ok := find(text, r, compiled()[i]); ok && better(at) {
			best = Finding{Rule: r.id, Offset: at}
		}
	}
	if at, ok := assignment(text); ok && better(at) {
		best = Finding{Rule: "secret-assignment", Offset: at}
	}
	if f, ok := highEntropy(text); ok && better(f.Offset) {
		best = f
	}
	return best, best.Offset >= 0
}

// find is where r's first secret in text starts: a match whose secret has
// the rule's entropy (and letters and digits when it asks) and is not
// allowed. A match that fails is passed over, not the rule.
func find(text string, r rule, c compiledRule) (int, bool) {
	for _, m := range c.re.FindAllStringSubmatchIndex(text, -1) {
		start, end := m[0], m[1]
		for g := 2; g+1 < len(m); g += 2 {
			if m[g] >= 0 {
				start, end = m[g], m[g+1]
				break
			}
		}
		secret := text[start:end]
		switch {
		case r.entropy > 0 && entropy(secret) < r.entropy:
		case r.mixed && !lettersAndDigits(secret):
		case c.allow != nil && c.allow.MatchString(secret):
		default:
			return start, true
		}
	}
	return 0, false
}

// keyword is one of a rule's keywords.
type keyword struct {
	text string
	rule int
}

// keywordsByFirstByte lists the keywords by their first byte, so that one
// pass over a text finds which rules' keywords occur in it: some 70
// strings.Contains calls over 8 KiB cost several times more.
var keywordsByFirstByte = sync.OnceValue(func() *[256][]keyword {
	var by [256][]keyword
	for i, r := range rules {
		for _, k := range r.keywords {
			by[k[0]] = append(by[k[0]], keyword{k, i})
		}
	}
	return &by
})

// keywordsIn reports, by rule, whether one of its keywords occurs in text,
// in any case (the keywords are lower case ASCII).
func keywordsIn(text string) []bool {
	present := make([]bool, len(rules))
	by := keywordsByFirstByte()
	for i := 0; i < len(text); i++ {
		for _, k := range by[lowerByte(text[i])] {
			if !present[k.rule] && hasLowerPrefix(text[i:], k.text) {
				present[k.rule] = true
			}
		}
	}
	return present
}

// hasLowerPrefix is strings.HasPrefix(strings.ToLower(s), prefix) for an
// ASCII prefix, without lowering all of s.
func hasLowerPrefix(s, prefix string) bool {
	if len(s) < len(prefix) {
		return false
	}
	for j := 0; j < len(prefix); j++ {
		if lowerByte(s[j]) != prefix[j] {
			return false
		}
	}
	return true
}

func lowerByte(c byte) byte {
	if c >= 'A' && c <= 'Z' {
		return c + 'a' - 'A'
	}
	return c
}

// secretNames are the words that make an assignment's value a secret, in
// lower case; they are matched in any case.
var secretNames = []string{"token", "secret", "password", "passwd", "passphrase", "pwd", "api_key", "api-key", "apikey",
	"access_key", "private_key", "private-key", "credential", "creds"}

// Limits of the assignment rule: a value shorter than minValue, or with
// fewer than minEntropy bits per character, is a word or a placeholder
// rather than a key ("hunter2", "xxxxxxxxxxxx", "changeme").
const (
	minValue   = 12
	minEntropy = 3.0
)

// assignment finds NAME=VALUE, NAME: VALUE, NAME := VALUE, "NAME": "VALUE"
// or NAME is VALUE where NAME contains a secret word and VALUE looks
// random. It is written by hand, not as a case-insensitive regexp, because
// it runs on every prompt: it stops only at '=', ':' and " is ", which
// prose seldom has, and looks at the name before and the value after; an
// unanchored regexp would try every byte.
func assignment(text string) (int, bool) {
	for k := 0; k < len(text); k++ {
		c := text[k]
		after := k + 1
		switch {
		case c == '=' && k > 0 && text[k-1] == ':':
			continue // the '=' of a ":=" seen at its ':'
		case c == ':' && after < len(text) && text[after] == '=':
			after++
		case c == ' ' && strings.HasPrefix(text[k:], " is "):
			after = k + len(" is ")
		case c != ':' && c != '=':
			continue
		}
		start, ok := secretName(text, k)
		if !ok {
			continue
		}
		if looksSecret(assignedValue(text, after)) {
			return start, true
		}
	}
	return 0, false
}

// secretName reads back from the separator at text[k]: blanks, an optional
// closing quote, then the name. It reports where the name starts and
// whether it contains a secret word.
func secretName(text string, k int) (int, bool) {
	end := k
	for end > 0 && (text[end-1] == ' ' || text[end-1] == '\t') {
		end--
	}
	if end > 0 && (text[end-1] == '"' || text[end-1] == '\'') {
		end--
	}
	start := end
	for start > 0 && isNameByte(text[start-1]) {
		start--
	}
	name := text[start:end]
	for _, w := range secretNames {
		for i := 0; i+len(w) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(w)], w) {
				return start, true
			}
		}
	}
	return 0, false
}

// assignedValue is the value after a separator ending before text[j]:
// blanks, an optional opening quote, then everything up to a blank, quote
// or separator.
func assignedValue(text string, j int) string {
	j = skipBlanks(text, j)
	if j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == '`') {
		j++
	}
	end := j
	for end < len(text) && !strings.ContainsRune(" \t\r\n\"'`,;", rune(text[end])) {
		end++
	}
	return text[j:end]
}

func skipBlanks(s string, j int) int {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j
}

func isNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// looksSecret tells a random value from a word, a reference or a path: long
// enough, with letters and digits, high entropy, and none of the characters
// of a variable ($TOKEN, ${SECRET}), a placeholder (<token>, {{ secret }}) or
// a call (os.Getenv(...)).
func looksSecret(v string) bool {
	if len(v) < minValue || strings.ContainsAny(v, "$<>{}()[]") || isPath(v) || strings.Contains(strings.ToLower(v), "example") {
		return false // a variable, a placeholder, a path, or a documented example key
	}
	return lettersAndDigits(v) && entropy(v) >= minEntropy
}

// lettersAndDigits reports whether s holds both: a key has them, a word
// does not.
func lettersAndDigits(s string) bool {
	var letter, digit bool
	for i := 0; i < len(s); i++ {
		c := s[i]
		letter = letter || c|0x20 >= 'a' && c|0x20 <= 'z'
		digit = digit || c >= '0' && c <= '9'
	}
	return letter && digit
}

// isPath reports whether v reads as a file path rather than a key, which
// may itself contain '/' (base64).
func isPath(v string) bool {
	for _, p := range []string{"/", "./", "../", "~/"} {
		if strings.HasPrefix(v, p) {
			return true
		}
	}
	if !strings.Contains(v, "/") {
		return false
	}
	dot := strings.LastIndexByte(v, '.')
	if dot < 0 || dot < strings.LastIndexByte(v, '/') || len(v)-dot-1 < 1 || len(v)-dot-1 > 5 {
		return false
	}
	for _, c := range v[dot+1:] {
		if c < 'a' || c > 'z' {
			return false
		}
	}
	return true // dir/name.ext
}
