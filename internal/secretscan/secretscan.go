// Package secretscan looks for secret material in text about to be written
// into an agent's terminal: a continuation prompt carries checkpoint text and
// tracker titles, and a key pasted into either must stop the wake rather than
// travel on into a terminal, its scrollback and tamq's history. It is pure.
//
// A Finding names the rule and the byte offset, never the matched text, so
// reporting a hit (in an error, a receipt or a log) cannot leak the secret.
package secretscan

import (
	"fmt"
	"math"
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

// rule is one kind of secret. The regexp runs only when one of the literals
// occurs in the text: ordinary prompts hold none of them, so a scan usually
// costs a few strings.Index calls instead of a regexp pass per rule.
type rule struct {
	name     string
	literals []string
	pattern  string
}

// rules are tried all; the earliest match wins, and at equal offsets the
// earlier rule (anthropic_key before openai_key, which would match the same
// "sk-" prefix).
var rules = []rule{
	{"private_key", []string{"PRIVATE KEY"}, `-----BEGIN (?:[A-Z0-9]+ )*PRIVATE KEY(?: BLOCK)?-----`},
	{"aws_access_key_id", []string{"AKIA", "ASIA"}, `\b(?:AKIA|ASIA)[A-Z0-9]{16}\b`},
	{"github_token", []string{"ghp_", "gho_", "ghu_", "ghs_", "ghr_", "github_pat_"}, `\bgh[pousr]_[A-Za-z0-9]{36,}|\bgithub_pat_[A-Za-z0-9_]{22,}`},
	{"slack_token", []string{"xox"}, `\bxox[abprs]-[A-Za-z0-9-]{10,}`},
	{"anthropic_key", []string{"sk-ant-"}, `\bsk-ant-[A-Za-z0-9_-]{20,}`},
	// Project, service-account and admin keys have a prefix and may hold
	// '-' and '_'; legacy keys are one long alphanumeric run, which keeps a
	// hyphenated word such as "sk-learn-…" from matching.
	{"openai_key", []string{"sk-"}, `\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{32,}`},
	{"google_api_key", []string{"AIza"}, `\bAIza[0-9A-Za-z_-]{35}`},
	{"stripe_key", []string{"_live_"}, `\b(?:sk|rk)_live_[0-9A-Za-z]{16,}`},
	{"jwt", []string{"eyJ"}, `\beyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*`},
}

// compiled holds the rules' regexps, compiled on the first scan so that a
// command that never scans does not pay for them at start-up.
var compiled = sync.OnceValue(func() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(rules))
	for i, r := range rules {
		res[i] = regexp.MustCompile(r.pattern)
	}
	return res
})

// Scan reports the first secret in text, or false when there is none.
func Scan(text string) (Finding, bool) {
	best := Finding{Offset: -1}
	for i, r := range rules {
		if !containsAny(text, r.literals) {
			continue
		}
		if loc := compiled()[i].FindStringIndex(text); loc != nil && (best.Offset < 0 || loc[0] < best.Offset) {
			best = Finding{Rule: r.name, Offset: loc[0]}
		}
	}
	if at, ok := assignment(text); ok && (best.Offset < 0 || at < best.Offset) {
		best = Finding{Rule: "secret_assignment", Offset: at}
	}
	return best, best.Offset >= 0
}

func containsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// secretNames are the words that make an assignment's value a secret, in
// lower case; they are matched in any case.
var secretNames = []string{"token", "secret", "password", "passwd", "pwd", "api_key", "apikey", "access_key", "private_key", "credential"}

// Limits of the assignment rule: a value shorter than minValue, or with
// fewer than minEntropy bits per character, is a word or a placeholder
// rather than a key ("hunter2", "xxxxxxxxxxxx", "changeme").
const (
	minValue   = 12
	minEntropy = 3.0
)

// assignment finds NAME=VALUE, NAME: VALUE, NAME := VALUE or "NAME": "VALUE"
// where NAME contains a secret word and VALUE looks random. It is written
// by hand, not as a case-insensitive regexp, because it runs on every
// prompt: it stops only at '=' and ':', which prose seldom has, and looks
// at the name before and the value after; an unanchored regexp would try
// every byte.
func assignment(text string) (int, bool) {
	for k := 0; k < len(text); k++ {
		c := text[k]
		if c != ':' && c != '=' || c == '=' && k > 0 && text[k-1] == ':' {
			continue // not a separator, or the '=' of a ":=" seen at its ':'
		}
		start, ok := secretName(text, k)
		if !ok {
			continue
		}
		after := k + 1
		if c == ':' && after < len(text) && text[after] == '=' {
			after++
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
	if len(v) < minValue || strings.ContainsAny(v, "$<>{}()[]") || isPath(v) {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		letter = letter || c|0x20 >= 'a' && c|0x20 <= 'z'
		digit = digit || c >= '0' && c <= '9'
	}
	return letter && digit && entropy(v) >= minEntropy
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

// entropy is the Shannon entropy of s in bits per byte: about 2 for a
// repetitive word, 3 to 4 for English words, above 4 for random base62 of
// twenty characters or more.
func entropy(s string) float64 {
	if s == "" {
		return 0
	}
	var counts [256]int
	for i := 0; i < len(s); i++ {
		counts[s[i]]++
	}
	n := float64(len(s))
	h := 0.0
	for _, c := range counts {
		if c > 0 {
			p := float64(c) / n
			h -= p * math.Log2(p)
		}
	}
	return h
}
