package secretscan

// The scanner as it was before the gitleaks port (commit 9d55118), kept as
// the baseline BenchmarkScan8KiBPrompt reports its ratio against. Only its
// names are changed.

import (
	"math"
	"regexp"
	"strings"
	"sync"
)

// oldRule is one kind of secret. The regexp runs only when one of the literals
// occurs in the text: ordinary prompts hold none of them, so a scan usually
// costs a few strings.Index calls instead of a regexp pass per oldRule.
type oldRule struct {
	name     string
	literals []string
	pattern  string
}

// oldRules are tried all; the earliest match wins, and at equal offsets the
// earlier oldRule (anthropic_key before openai_key, which would match the same
// "sk-" prefix).
var oldRules = []oldRule{
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

// oldCompiled holds the oldRules' regexps, oldCompiled on the first scan so that a
// command that never scans does not pay for them at start-up.
var oldCompiled = sync.OnceValue(func() []*regexp.Regexp {
	res := make([]*regexp.Regexp, len(oldRules))
	for i, r := range oldRules {
		res[i] = regexp.MustCompile(r.pattern)
	}
	return res
})

// oldScan reports the first secret in text, or false when there is none.
func oldScan(text string) (Finding, bool) {
	best := Finding{Offset: -1}
	for i, r := range oldRules {
		if !oldContainsAny(text, r.literals) {
			continue
		}
		if loc := oldCompiled()[i].FindStringIndex(text); loc != nil && (best.Offset < 0 || loc[0] < best.Offset) {
			best = Finding{Rule: r.name, Offset: loc[0]}
		}
	}
	if at, ok := oldAssignment(text); ok && (best.Offset < 0 || at < best.Offset) {
		best = Finding{Rule: "secret_assignment", Offset: at}
	}
	return best, best.Offset >= 0
}

func oldContainsAny(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// oldSecretNames are the words that make an oldAssignment's value a secret, in
// lower case; they are matched in any case.
var oldSecretNames = []string{"token", "secret", "password", "passwd", "pwd", "api_key", "apikey", "access_key", "private_key", "credential"}

// Limits of the oldAssignment oldRule: a value shorter than oldMinValue, or with
// fewer than oldMinEntropy bits per character, is a word or a placeholder
// rather than a key ("hunter2", "xxxxxxxxxxxx", "changeme").
const (
	oldMinValue   = 12
	oldMinEntropy = 3.0
)

// oldAssignment finds NAME=VALUE, NAME: VALUE, NAME := VALUE or "NAME": "VALUE"
// where NAME contains a secret word and VALUE looks random. It is written
// by hand, not as a case-insensitive regexp, because it runs on every
// prompt: it stops only at '=' and ':', which prose seldom has, and looks
// at the name before and the value after; an unanchored regexp would try
// every byte.
func oldAssignment(text string) (int, bool) {
	for k := 0; k < len(text); k++ {
		c := text[k]
		if c != ':' && c != '=' || c == '=' && k > 0 && text[k-1] == ':' {
			continue // not a separator, or the '=' of a ":=" seen at its ':'
		}
		start, ok := oldSecretName(text, k)
		if !ok {
			continue
		}
		after := k + 1
		if c == ':' && after < len(text) && text[after] == '=' {
			after++
		}
		if oldLooksSecret(oldAssignedValue(text, after)) {
			return start, true
		}
	}
	return 0, false
}

// oldSecretName reads back from the separator at text[k]: blanks, an optional
// closing quote, then the name. It reports where the name starts and
// whether it contains a secret word.
func oldSecretName(text string, k int) (int, bool) {
	end := k
	for end > 0 && (text[end-1] == ' ' || text[end-1] == '\t') {
		end--
	}
	if end > 0 && (text[end-1] == '"' || text[end-1] == '\'') {
		end--
	}
	start := end
	for start > 0 && oldIsNameByte(text[start-1]) {
		start--
	}
	name := text[start:end]
	for _, w := range oldSecretNames {
		for i := 0; i+len(w) <= len(name); i++ {
			if strings.EqualFold(name[i:i+len(w)], w) {
				return start, true
			}
		}
	}
	return 0, false
}

// oldAssignedValue is the value after a separator ending before text[j]:
// blanks, an optional opening quote, then everything up to a blank, quote
// or separator.
func oldAssignedValue(text string, j int) string {
	j = oldSkipBlanks(text, j)
	if j < len(text) && (text[j] == '"' || text[j] == '\'' || text[j] == '`') {
		j++
	}
	end := j
	for end < len(text) && !strings.ContainsRune(" \t\r\n\"'`,;", rune(text[end])) {
		end++
	}
	return text[j:end]
}

func oldSkipBlanks(s string, j int) int {
	for j < len(s) && (s[j] == ' ' || s[j] == '\t') {
		j++
	}
	return j
}

func oldIsNameByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' || c == '.'
}

// oldLooksSecret tells a random value from a word, a reference or a path: long
// enough, with letters and digits, high oldEntropy, and none of the characters
// of a variable ($TOKEN, ${SECRET}), a placeholder (<token>, {{ secret }}) or
// a call (os.Getenv(...)).
func oldLooksSecret(v string) bool {
	if len(v) < oldMinValue || strings.ContainsAny(v, "$<>{}()[]") || oldIsPath(v) {
		return false
	}
	var letter, digit bool
	for i := 0; i < len(v); i++ {
		c := v[i]
		letter = letter || c|0x20 >= 'a' && c|0x20 <= 'z'
		digit = digit || c >= '0' && c <= '9'
	}
	return letter && digit && oldEntropy(v) >= oldMinEntropy
}

// oldIsPath reports whether v reads as a file path rather than a key, which
// may itself contain '/' (base64).
func oldIsPath(v string) bool {
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

// oldEntropy is the Shannon oldEntropy of s in bits per byte: about 2 for a
// repetitive word, 3 to 4 for English words, above 4 for random base62 of
// twenty characters or more.
func oldEntropy(s string) float64 {
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
