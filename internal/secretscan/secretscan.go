// Package secretscan looks for secret material in text about to be written
// into an agent's terminal or kept by the engine: a continuation prompt
// carries checkpoint text and tracker titles, a message body is shown to an
// agent, and a release reason or a checkpoint goes into the engine's
// database and receipts. A key in any of them must be held back rather than
// travel on into a terminal, its scrollback, tamq's history or State Hub.
// It is pure.
//
// It finds keys by a table of rules, most of them gitleaks' (rules.go,
// gitleaks_rules.go), tried where their keywords are (searchIn), a secret
// assignment rule (NAME=VALUE with a secret word in NAME), and an entropy
// check of long base64 and hex runs (entropy.go), on the text in NFKC form
// (normalize.go).
//
// A Finding names the rule and the byte offset, never the matched text, so
// reporting a hit (in an error, a receipt or a log) cannot leak the secret.
package secretscan

import (
	"fmt"
	"regexp"
	"regexp/syntax"
	"slices"
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

// compiled is rule i's regexps, compiled on the first scan whose text
// holds one of the rule's keywords: an ordinary prompt wakes a handful of
// the rules, and a command that scans one message body should not pay for
// compiling two hundred regexps (some 20 ms and 11 MB allocated,
// BenchmarkCompileAllRules) at its start.
func compiled(i int) *compiledRule { return &table().compiled[i] }

type compiledRule struct {
	once                         sync.Once
	allow, allowMatch, allowLine *regexp.Regexp
	// lines is how many newlines a match can span at most, or -1 when
	// that is unbounded or the match need not hold a keyword (see
	// searchIn).
	lines int
	// atKeyword is the rule's regexp anchored at its start and without a
	// \b there (boundary says there was one), when every match starts
	// with one of the rule's keywords: searchIn then tries it at each
	// keyword, not at every byte of a window.
	atKeyword *regexp.Regexp
	boundary  bool
	// re is the rule's regexp as it is, compiled when first needed (by
	// the rules without atKeyword, and by the tests).
	reOnce sync.Once
	re     *regexp.Regexp
}

// get is rule r's compiled form.
func (c *compiledRule) get(r *rule) *compiledRule {
	c.once.Do(func() {
		c.allow, c.allowMatch, c.allowLine = compileIf(r.allow), compileIf(r.allowMatch), compileIf(r.allowLine)
		c.lines = -1
		re, err := syntax.Parse(r.pattern, syntax.Perl)
		if err != nil || r.anywhere {
			return // unanchored panics with err
		}
		if n := maxNewlines(re); n <= maxWindowLines {
			c.lines = n
		}
		if starts, ok := prefixes(re.Simplify()); ok && startWithKeywords(starts, r.keywords) {
			if pattern, boundary, ok := anchored(r.pattern, re); ok {
				c.atKeyword, c.boundary = regexp.MustCompile(pattern), boundary
			}
		}
	})
	return c
}

func compileIf(pattern string) *regexp.Regexp {
	if pattern == "" {
		return nil
	}
	return regexp.MustCompile(pattern)
}

// unanchored is rule r's regexp as it is.
func (c *compiledRule) unanchored(r *rule) *regexp.Regexp {
	c.reOnce.Do(func() { c.re = regexp.MustCompile(r.pattern) })
	return c.re
}

// globalAllow is gitleaks' global allowlist, which every rule's secret is
// checked against: a boolean or null, one character repeated, a variable
// ($1, $NAME, ${NAME}, %NAME%, @NAME@, {{ .Values.x }}, ${{ secrets.X }}), a
// format verb, and a path under / or /Users. Its first regexp is gitleaks'
// (?i)^true|false|null$ with the grouping it means: as written it allows
// any secret with "false" inside.
var globalAllow = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile("(?:" + strings.Join([]string{
		`(?i)^(?:true|false|null)$`,
		`^(?i:a+|b+|c+|d+|e+|f+|g+|h+|i+|j+|k+|l+|m+|n+|o+|p+|q+|r+|s+|t+|u+|v+|w+|x+|y+|z+|\*+|\.+)$`,
		`^\$(?:\d+|{\d+})$`,
		`^\$(?:[A-Z_]+|[a-z_]+)$`,
		`^\${(?:[A-Z_]+|[a-z_]+)}$`,
		`^\{\{[ \t]*[\w ().|]+[ \t]*}}$`,
		`^\$\{\{[ \t]*(?:(?:env|github|secrets|vars)(?:\.[A-Za-z]\w+)+[\w "'&./=|]*)[ \t]*}}$`,
		`^%(?:[A-Z_]+|[a-z_]+)%$`,
		`^%[+\-# 0]?[bcdeEfFgGoOpqstTUvxX]$`,
		`^\{\d{0,2}}$`,
		`^@(?:[A-Z_]+|[a-z_]+)@$`,
		`^/Users/(?i)[a-z0-9]+/[\w .-/]+$`,
		`^/(?:bin|etc|home|opt|tmp|usr|var)/[\w ./-]+$`,
	}, ")|(?:") + ")")
})

// globalStopwords are gitleaks' global stopwords: a secret holding one (in
// any case) is an example, not a key.
var globalStopwords = []string{"014df517-39d1-4453-b7b3-9930c563627c", "abcdefghijklmnopqrstuvwxyz"}

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
	t := table()
	for _, h := range keywordHits(text) {
		r := &t.rules[h.rule]
		if at, ok := searchIn(text, h.at, r, t.compiled[h.rule].get(r)); ok && better(at) {
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

// maxWindowLines bounds the lines a rule's window reaches either side of a
// keyword; a rule whose match can span more searches the whole text.
const maxWindowLines = 16

// searchIn is find on the parts of text a match of r can be in; at are
// where r's keywords occur in text, in order. A regexp without a literal prefix costs
// some tens of microseconds a KiB, so an 8 KiB prompt that names a token on
// a few lines should pay for those, not for all of it:
//   - when every match of r starts with one of its keywords (atKeyword,
//     most rules), r is tried at each keyword only;
//   - else when every match holds a keyword and spans at most c.lines
//     newlines, r searches the lines that far either side of a keyword's
//     line. A window's edges are a line's ends, which the rules'
//     boundaries (\b, tokenEnd's \s and $) take as the newline they
//     stand for;
//   - else r searches all of text.
//
// TestScanTriesEachRuleWhereItsMatchesAre checks the premises on samples of
// every rule's regexp, TestScanWindowsFindWhatTheWholeTextDoes the result
// on the tests' texts.
func searchIn(text string, at []int, r *rule, c *compiledRule) (int, bool) {
	if c.atKeyword != nil {
		for _, p := range at {
			if c.boundary && p > 0 && isWordByte(text[p-1]) == isWordByte(text[p]) ||
				r.named && !operatorNear(text, p) {
				continue
			}
			if m := c.atKeyword.FindStringSubmatchIndex(text[p:]); m != nil {
				for i := range m {
					if m[i] >= 0 {
						m[i] += p
					}
				}
				if start, ok := check(text, m, r, c); ok {
					return start, true
				}
			}
		}
		return 0, false
	}
	if c.lines < 0 {
		return find(text, r, c)
	}
	for k := 0; k < len(at); {
		start, end := lineStart(text, at[k], c.lines), lineEnd(text, at[k], c.lines)
		line := lineEnd(text, at[k], 0) // the end of the last keyword's line
		for k++; k < len(at); k++ {
			if at[k] < line {
				continue // on the line of the keyword before: nothing to add
			}
			if lineStart(text, at[k], c.lines) > end {
				break
			}
			end, line = lineEnd(text, at[k], c.lines), lineEnd(text, at[k], 0)
		}
		if off, ok := find(text[start:end], r, c); ok {
			return start + off, true
		}
	}
	return 0, false
}

// operatorNear reports whether a semi-generic rule's match starting at p
// can reach its operator. Its NAME is the vendor's name and up to twenty
// more name characters or blanks, then up to three blanks or quotes: after
// the first word (the vendor's name and what is joined to it, such as
// DATADOG_APP_KEY) at most 23 bytes of them come before the operator. In
// prose a secret word is followed by a few more words ("the secret
// rotation stays with a human"): this loop rules that out for less than
// setting the regexp going costs.
func operatorNear(text string, p int) bool {
	i := p
	for i < len(text) && (isWordByte(text[i]) || text[i] == '.' || text[i] == '-') {
		i++
	}
	for j := i; j < len(text) && j-i <= 23; j++ {
		if c := text[j]; !isWordByte(c) && strings.IndexByte(" \t\r\n\f\v.-'\"", c) < 0 {
			return strings.IndexByte("=>:|?,", c) >= 0
		}
	}
	return false
}

// lineStart is where the line n lines before the one holding text[at]
// starts; lineEnd where the line n lines after it ends (before its
// newline).
func lineStart(text string, at, n int) int {
	for ; ; n-- {
		i := strings.LastIndexByte(text[:at], '\n')
		if i < 0 {
			return 0
		}
		if n == 0 {
			return i + 1
		}
		at = i
	}
}

func lineEnd(text string, at, n int) int {
	for ; ; n-- {
		i := strings.IndexByte(text[at:], '\n')
		if i < 0 {
			return len(text)
		}
		if n == 0 {
			return at + i
		}
		at += i + 1
	}
}

// prefixes is the literal strings (in lower case) one of which every match
// of re starts with, or false when re does not tell: its alternatives, and
// within each the literals and small character classes from its start up
// to the first repeat, larger class or other operator.
func prefixes(re *syntax.Regexp) ([]string, bool) {
	set, _ := prefixSet(re)
	for _, p := range set {
		if p == "" {
			return nil, false
		}
	}
	return set, len(set) > 0
}

// prefixSet is prefixes' walk: the set, and whether it is all re matches
// (so that what follows re in a concatenation extends it).
func prefixSet(re *syntax.Regexp) ([]string, bool) {
	const most = 64
	switch re.Op {
	case syntax.OpLiteral:
		return []string{strings.ToLower(string(re.Rune))}, true
	case syntax.OpCharClass:
		var set []string
		for i := 0; i+1 < len(re.Rune); i += 2 {
			for c := re.Rune[i]; c <= re.Rune[i+1]; c++ {
				if len(set) == 8 {
					return []string{""}, false
				}
				if l := strings.ToLower(string(c)); !slices.Contains(set, l) {
					set = append(set, l)
				}
			}
		}
		return set, true
	case syntax.OpCapture:
		return prefixSet(re.Sub[0])
	case syntax.OpQuest: // as (?:|sub)
		set, all := prefixSet(re.Sub[0])
		return append([]string{""}, set...), all
	case syntax.OpPlus:
		set, _ := prefixSet(re.Sub[0])
		return set, false
	case syntax.OpRepeat:
		if re.Min > 0 {
			set, _ := prefixSet(re.Sub[0])
			return set, false
		}
	case syntax.OpAlternate:
		var set []string
		all := true
		for _, sub := range re.Sub {
			s, a := prefixSet(sub)
			set, all = append(set, s...), all && a
		}
		if len(set) > most {
			return []string{""}, false
		}
		return set, all
	case syntax.OpConcat:
		set := []string{""}
		for _, sub := range re.Sub {
			if emptyWidth(sub) {
				continue
			}
			s, all := prefixSet(sub)
			if len(set)*len(s) > most {
				return set, false
			}
			var next []string
			for _, a := range set {
				for _, b := range s {
					next = append(next, a+b)
				}
			}
			if set = next; !all {
				return set, false
			}
		}
		return set, true
	case syntax.OpBeginText, syntax.OpBeginLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
		return []string{""}, true
	}
	return []string{""}, false
}

func emptyWidth(re *syntax.Regexp) bool {
	switch re.Op {
	case syntax.OpBeginText, syntax.OpBeginLine, syntax.OpWordBoundary, syntax.OpNoWordBoundary, syntax.OpEmptyMatch:
		return true
	}
	return false
}

// startWithKeywords reports whether each of prefixes starts with one of
// keywords.
func startWithKeywords(prefixes, keywords []string) bool {
	for _, p := range prefixes {
		if !slices.ContainsFunc(keywords, func(k string) bool { return strings.HasPrefix(p, k) }) {
			return false
		}
	}
	return true
}

// anchored is pattern (parsed: re) anchored at its start by \A, less a \b
// it starts with (then boundary): anchored at a keyword in a slice of the
// text, a \b there would not see the byte before the slice, so searchIn
// tests it itself. The \b is cut from the text of the pattern (after its
// flags, as uniqueToken writes it), which must parse to re without it;
// else there is no anchored form (false).
func anchored(pattern string, re *syntax.Regexp) (anchoredPattern string, boundary, ok bool) {
	flags := 0 // the length of a (?i) at its start
	if end := strings.IndexByte(pattern, ')'); strings.HasPrefix(pattern, "(?") && end > 2 &&
		strings.IndexFunc(pattern[2:end], func(c rune) bool { return c < 'a' || c > 'z' }) < 0 {
		flags = end + 1
	}
	if re.Op != syntax.OpConcat || re.Sub[0].Op != syntax.OpWordBoundary {
		return `\A(?:` + pattern + `)`, false, true
	}
	if !strings.HasPrefix(pattern[flags:], `\b`) {
		return "", false, false
	}
	cut := pattern[:flags] + pattern[flags+2:]
	want := &syntax.Regexp{Op: syntax.OpConcat, Flags: re.Flags, Sub: re.Sub[1:]}
	if len(want.Sub) == 1 {
		want = want.Sub[0]
	}
	if got, err := syntax.Parse(cut, syntax.Perl); err != nil || !got.Equal(want) {
		return "", false, false
	}
	return `\A(?:` + cut + `)`, true, true
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_'
}

// maxNewlines is how many newlines a match of re can hold at most, or more
// than maxWindowLines when it has no bound.
func maxNewlines(re *syntax.Regexp) int {
	const unbounded = maxWindowLines + 1
	sub := func(i int) int { return maxNewlines(re.Sub[i]) }
	switch re.Op {
	case syntax.OpLiteral:
		n := 0
		for _, r := range re.Rune {
			if r == '\n' {
				n++
			}
		}
		return n
	case syntax.OpCharClass:
		for i := 0; i+1 < len(re.Rune); i += 2 {
			if re.Rune[i] <= '\n' && '\n' <= re.Rune[i+1] {
				return 1
			}
		}
		return 0
	case syntax.OpAnyChar:
		return 1
	case syntax.OpCapture, syntax.OpQuest:
		return sub(0)
	case syntax.OpStar, syntax.OpPlus:
		if sub(0) > 0 {
			return unbounded
		}
		return 0
	case syntax.OpRepeat:
		n := sub(0)
		if n > 0 && (re.Max < 0 || n*re.Max > maxWindowLines) {
			return unbounded
		}
		return n * max(re.Max, 0)
	case syntax.OpConcat:
		n := 0
		for i := range re.Sub {
			n = min(n+sub(i), unbounded)
		}
		return n
	case syntax.OpAlternate:
		n := 0
		for i := range re.Sub {
			n = max(n, sub(i))
		}
		return n
	}
	return 0 // empty, anchors and word boundaries match no character
}

// find is where r's first secret in text starts: a match whose secret
// passes r's tests. A match that fails is passed over, not the rule.
func find(text string, r *rule, c *compiledRule) (int, bool) {
	for _, m := range c.unanchored(r).FindAllStringSubmatchIndex(text, -1) {
		if start, ok := check(text, m, r, c); ok {
			return start, true
		}
	}
	return 0, false
}

// check is where the secret of match m starts, if it passes r's tests (see
// rule).
func check(text string, m []int, r *rule, c *compiledRule) (int, bool) {
	start, end := secretIn(m, r.group)
	secret := text[start:end]
	switch {
	case r.entropy > 0 && entropy(secret) < r.entropy:
	case r.mixed && !lettersAndDigits(secret):
	case c.allow != nil && c.allow.MatchString(secret):
	case c.allowMatch != nil && c.allowMatch.MatchString(text[matchStart(text, m[0]):m[1]]):
	case c.allowLine != nil && c.allowLine.MatchString(text[lineStart(text, m[0], 0):lineEnd(text, max(m[0], m[1]-1), 0)]):
	case globalAllow().MatchString(secret) || holdsStopword(secret, globalStopwords) || holdsStopword(secret, r.stopwords):
	case r.named && idShaped(secret) && !oneWord(text[m[0]:start]):
	case r.valid != nil && !r.valid(secret):
	default:
		return start, true
	}
	return 0, false
}

// secretIn is where the secret of match m is: capture group group, or with
// group 0 the first group that matched something (as gitleaks takes it),
// or the whole match.
func secretIn(m []int, group int) (int, int) {
	if group > 0 && 2*group+1 < len(m) && m[2*group] >= 0 {
		return m[2*group], m[2*group+1]
	}
	for g := 2; g+1 < len(m); g += 2 {
		if m[g] >= 0 && m[g+1] > m[g] {
			return m[g], m[g+1]
		}
	}
	return m[0], m[1]
}

// holdsStopword reports whether secret holds one of stopwords (lower case)
// in any case.
func holdsStopword(secret string, stopwords []string) bool {
	if len(stopwords) == 0 {
		return false
	}
	lower := strings.ToLower(secret)
	for _, w := range stopwords {
		if strings.Contains(lower, w) {
			return true
		}
	}
	return false
}

// matchStart is where gitleaks' match of a semi-generic rule at m0 would
// start: its [\w.-]{0,50}? (left out of semiGeneric) takes the name
// characters before it, fifty at most.
func matchStart(text string, m0 int) int {
	start := m0
	for start > 0 && m0-start < 50 && (isWordByte(text[start-1]) || text[start-1] == '.' || text[start-1] == '-') {
		start--
	}
	return start
}

// idShaped reports whether s is shaped like an id a prompt holds anyway: a
// commit id or digest (40, 64 or 128 hex digits, all of one case) or a
// UUID (lease ids are UUIDv7s; message, request and trace ids are UUIDs).
func idShaped(s string) bool {
	if hashLengths[len(s)] {
		var upper, lower bool
		for i := 0; i < len(s); i++ {
			c := s[i]
			switch {
			case c >= '0' && c <= '9':
			case c >= 'a' && c <= 'f':
				lower = true
			case c >= 'A' && c <= 'F':
				upper = true
			default:
				return false
			}
		}
		return !(upper && lower)
	}
	if len(s) != 36 {
		return false
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if i == 8 || i == 13 || i == 18 || i == 23 {
			if c != '-' {
				return false
			}
		} else if !(c >= '0' && c <= '9' || c|0x20 >= 'a' && c|0x20 <= 'f') {
			return false
		}
	}
	return true
}

// oneWord reports whether the NAME before a semi-generic rule's secret
// (match, up to the secret) is one word: without its operator, quotes and
// blanks at the end, it holds no blank.
func oneWord(name string) bool {
	name = strings.TrimRight(name, " \t\r\n'\"`=:>,|?")
	return !strings.ContainsAny(name, " \t\r\n")
}

// keyword is one of a rule's keywords.
type keyword struct {
	text string
	rule int
}

// keywordIndex finds which rules' keywords occur in a text in one pass
// over it. At each byte, the two bytes there (lowered) pick a bucket of the
// keywords that may start with them: most pairs of a prompt's letters pick
// none, so the pass costs a table look-up a byte, not a try of every
// keyword starting with a common letter. Every keyword is lower case ASCII
// of two bytes or more (TestScanRuleTable).
type keywordIndex struct {
	bucket  [1 << 12]uint16 // by pairHash: 1 + an index into buckets, or 0
	buckets [][]keyword
}

func pairHash(c0, c1 byte) int { return int(c0&0x3f)<<6 | int(c1&0x3f) }

var keywords = sync.OnceValue(func() *keywordIndex {
	var x keywordIndex
	for i, r := range rules() {
		for _, k := range r.keywords {
			h := pairHash(k[0], k[1])
			if x.bucket[h] == 0 {
				x.buckets = append(x.buckets, nil)
				x.bucket[h] = uint16(len(x.buckets))
			}
			x.buckets[x.bucket[h]-1] = append(x.buckets[x.bucket[h]-1], keyword{text: k, rule: i})
		}
	}
	return &x
})

// keywordHit is where the keywords of one rule occur in a text, in order.
type keywordHit struct {
	rule int
	at   []int
}

// maxRules bounds the table, for keywordHits' array of slots (on the stack,
// not allocated at each scan).
const maxRules = 512

// keywordHits is, for each rule one of whose keywords occurs in text (in
// any case), where they occur; in the order of rules.
func keywordHits(text string) []keywordHit {
	x := keywords()
	var (
		hits []keywordHit
		slot [maxRules]uint16 // by rule, 1 + its index in hits, or 0
	)
	for i := 0; i+1 < len(text); i++ {
		b := x.bucket[pairHash(lower[text[i]], lower[text[i+1]])]
		if b == 0 {
			continue
		}
		for _, k := range x.buckets[b-1] {
			if !hasLowerPrefix(text[i:], k.text) {
				continue
			}
			if s := slot[k.rule]; s == 0 {
				hits = append(hits, keywordHit{k.rule, []int{i}})
				slot[k.rule] = uint16(len(hits))
			} else if at := hits[s-1].at; at[len(at)-1] != i { // not two keywords of a rule at one offset
				hits[s-1].at = append(at, i)
			}
		}
	}
	slices.SortFunc(hits, func(a, b keywordHit) int { return a.rule - b.rule })
	return hits
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

// lower maps a byte to its ASCII lower case.
var lower = func() (l [256]byte) {
	for i := range l {
		l[i] = byte(i)
		if i >= 'A' && i <= 'Z' {
			l[i] += 'a' - 'A'
		}
	}
	return l
}()

func lowerByte(c byte) byte { return lower[c] }

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
