package secretscan

import (
	"maps"
	"math/rand/v2"
	"regexp/syntax"
	"slices"
	"strings"
	"testing"
	"unicode"
)

// sample writes a random string re matches (barring its assertions, \b and
// the like, which it writes nothing for): each alternative, count and
// character as rnd picks them, case folded at random where re ignores case.
// Unbounded repeats stop a few past their minimum, and characters are
// printable ASCII where the class has any.
func sample(b *strings.Builder, re *syntax.Regexp, rnd *rand.Rand) {
	switch re.Op {
	case syntax.OpLiteral:
		for _, r := range re.Rune {
			if re.Flags&syntax.FoldCase != 0 && rnd.IntN(2) == 0 {
				r = unicode.SimpleFold(r)
			}
			b.WriteRune(r)
		}
	case syntax.OpCharClass:
		b.WriteRune(pickRune(re.Rune, rnd))
	case syntax.OpAnyCharNotNL, syntax.OpAnyChar:
		b.WriteByte("abcXYZ019-_ "[rnd.IntN(12)])
	case syntax.OpCapture:
		sample(b, re.Sub[0], rnd)
	case syntax.OpStar, syntax.OpPlus, syntax.OpQuest, syntax.OpRepeat:
		lo, hi := re.Min, re.Max
		switch re.Op {
		case syntax.OpStar:
			lo, hi = 0, -1
		case syntax.OpPlus:
			lo, hi = 1, -1
		case syntax.OpQuest:
			lo, hi = 0, 1
		}
		if hi < 0 {
			hi = lo + 3
		}
		for range lo + rnd.IntN(hi-lo+1) {
			sample(b, re.Sub[0], rnd)
		}
	case syntax.OpConcat:
		for _, s := range re.Sub {
			sample(b, s, rnd)
		}
	case syntax.OpAlternate:
		sample(b, re.Sub[rnd.IntN(len(re.Sub))], rnd)
	}
}

// pickRune picks a rune of a character class (pairs of lo, hi), printable
// ASCII if the class has some.
func pickRune(ranges []rune, rnd *rand.Rand) rune {
	var ascii []rune
	for i := 0; i+1 < len(ranges); i += 2 {
		for r := max(ranges[i], ' '); r <= min(ranges[i+1], '~'); r++ {
			ascii = append(ascii, r)
		}
	}
	if len(ascii) > 0 {
		return ascii[rnd.IntN(len(ascii))]
	}
	return ranges[2*rnd.IntN(len(ranges)/2)]
}

// samplePattern is sample of a pattern.
func samplePattern(t *testing.T, pattern string, rnd *rand.Rand) string {
	t.Helper()
	re, err := syntax.Parse(pattern, syntax.Perl)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	sample(&b, re.Simplify(), rnd)
	return b.String()
}

// Rules search only the lines around their keywords (searchIn), which is
// right when every match holds a keyword, and most only at their keywords
// (atKeyword), which is right when every match starts with one: samples
// of every alternative of every rule's regexp show that they do, unless
// the rule says otherwise (anywhere).
func TestScanTriesEachRuleWhereItsMatchesAre(t *testing.T) {
	rnd := rand.New(rand.NewPCG(1, 2))
	atKeyword, windows := 0, 0
	for i := range rules() {
		r := &rules()[i]
		c := compiled(i).get(r)
		if r.anywhere {
			if c.lines >= 0 {
				t.Errorf("%s: searches windows though its keywords may be outside its match", r.id)
			}
			continue
		}
		matched := 0
		for range 100 {
			s := samplePattern(t, r.pattern, rnd)
			m := c.unanchored(r).FindStringIndex(s)
			if m == nil {
				continue // an assertion the sample broke
			}
			matched++
			if !holdsKeyword(s[m[0]:m[1]], r.keywords) {
				t.Errorf("%s: the match %q holds none of its keywords %q", r.id, s[m[0]:m[1]], r.keywords)
				break
			}
			if c.atKeyword != nil && !startsWithKeyword(s[m[0]:m[1]], r.keywords) {
				t.Errorf("%s: the match %q starts with none of its keywords %q", r.id, s[m[0]:m[1]], r.keywords)
				break
			}
		}
		if matched == 0 {
			t.Errorf("%s: no sample of its regexp matched it", r.id)
		}
		switch {
		case c.atKeyword != nil:
			atKeyword++
		case c.lines >= 0:
			windows++
		}
	}
	t.Logf("of %d rules, %d are tried at their keywords, %d search the lines around them, the rest the whole text", len(rules()), atKeyword, windows)
	if atKeyword < len(rules())/2 {
		t.Errorf("only %d rules are tried at their keywords", atKeyword)
	}
}

func startsWithKeyword(s string, keywords []string) bool {
	s = strings.ToLower(s)
	for _, k := range keywords {
		if strings.HasPrefix(s, k) {
			return true
		}
	}
	return false
}

func holdsKeyword(s string, keywords []string) bool {
	s = strings.ToLower(s)
	for _, k := range keywords {
		if strings.Contains(s, k) {
			return true
		}
	}
	return false
}

// A rule searching the lines around its keywords (searchIn) finds what it
// finds in the whole text, in every test string and prompt of the tests.
func TestScanWindowsFindWhatTheWholeTextDoes(t *testing.T) {
	texts := []string{ordinaryPrompt(), benchText(), everyKeywordText()}
	for _, m := range []map[string][]string{gitleaksTruePositives, gitleaksFalsePositives, gitleaksGeneratedShapes, tamqTruePositives, tamqFalsePositives} {
		// In the order of the rules' ids, so that the texts joined below
		// are the same at every run.
		for _, id := range slices.Sorted(maps.Keys(m)) {
			texts = append(texts, m[id]...)
		}
	}
	// The strings again, several to a text, on lines of their own and not.
	for i, n := 0, len(texts); i+3 < n; i += 3 {
		texts = append(texts, strings.Join(texts[i:i+3], "\n"), strings.Join(texts[i:i+3], " "))
	}
	windowed := 0
	for _, text := range texts {
		for _, h := range keywordHits(text) {
			r := &rules()[h.rule]
			c := compiled(h.rule).get(r)
			if c.lines < 0 {
				continue
			}
			windowed++
			at, ok := searchIn(text, h.at, r, c)
			wantAt, wantOK := find(text, r, c)
			// The lines around a keyword may find a secret that the whole
			// text's search passed over (an earlier match of the rule,
			// refused by its allowlist, took the text it stands in): more
			// found is on the safe side. What the whole text finds, they
			// must find, at the same place.
			if wantOK && (!ok || at != wantAt) {
				t.Errorf("%s in %q: lines around its keywords give %d, %v; the whole text %d, %v", r.id, text, at, ok, wantAt, wantOK)
			}
		}
	}
	if windowed < 1000 {
		t.Errorf("only %d searches in windows", windowed)
	}
}
