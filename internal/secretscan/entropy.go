package secretscan

import "math"

// The entropy check finds keys no rule names, such as a bare AWS secret
// access key (40 characters of base64) or a line of a PEM body, as runs of
// base64 or hex characters that are long and random. Its limits keep what
// every prompt holds from tripping it: lease ids (UUIDv7, lower-case hex
// and dashes), commit ids (40 hex digits), paths and identifiers.
const (
	// A base64 run must have at least minBase64Run characters, digits, an
	// eighth of them upper case letters and an eighth lower case (random
	// base64 has about 40% of each; a path has few capitals, "2026-05-04T09Z"
	// in a file name gives two), and minBase64Entropy bits per character.
	// Random base64 of 32 characters has about 4.6 bits, a UUID at most
	// log2(17) = 4.09 (16 digits and the dash), an English identifier or a
	// path about 4.
	minBase64Run     = 32
	minBase64Entropy = 4.3
	// A hex run (all of it 0-9a-fA-F) must have at least minHexRun digits
	// and minHexEntropy bits per digit, and must not be as long as a SHA-1,
	// SHA-256 or SHA-512: those are commit and object ids and digests, and
	// a hex key of the same length cannot be told from them (the assignment
	// rule still catches one given a name such as api_key).
	minHexRun     = 40
	minHexEntropy = 3.0
)

// hashLengths are the hex lengths of SHA-1, SHA-256 and SHA-512.
var hashLengths = map[int]bool{40: true, 64: true, 128: true}

// highEntropy finds the first run of base64 (standard or URL alphabet)
// characters that is a secret by the limits above.
func highEntropy(text string) (Finding, bool) {
	for i := 0; i < len(text); {
		if !isBase64(text[i]) {
			i++
			continue
		}
		j := i
		for j < len(text) && isBase64(text[j]) {
			j++
		}
		if rule := judgeRun(text[i:j]); rule != "" {
			return Finding{Rule: rule, Offset: i}, true
		}
		i = j
	}
	return Finding{}, false
}

// judgeRun names the entropy rule run breaks, or "".
func judgeRun(run string) string {
	if len(run) < minBase64Run && len(run) < minHexRun {
		return ""
	}
	var upper, lower, digit, other int
	hex := true
	for i := 0; i < len(run); i++ {
		c := run[i]
		switch {
		case c >= 'A' && c <= 'Z':
			upper++
			hex = hex && c <= 'F'
		case c >= 'a' && c <= 'z':
			lower++
			hex = hex && c <= 'f'
		case c >= '0' && c <= '9':
			digit++
		default:
			other++
			hex = false
		}
	}
	switch {
	case hex:
		if len(run) >= minHexRun && !hashLengths[len(run)] && upper+lower > 0 && digit > 0 && entropy(run) >= minHexEntropy {
			return "high-entropy-hex"
		}
	case len(run) >= minBase64Run && upper >= len(run)/8 && lower >= len(run)/8 && digit > 0 && !sequence(run) &&
		entropy(run) >= minBase64Entropy:
		return "high-entropy-base64"
	}
	return ""
}

// sequence reports whether run is mostly an alphabet written out
// ("ABCDEFGHIJ...0123456789"): as random by entropy as a key, but no secret.
func sequence(run string) bool {
	steps := 0
	for i := 1; i < len(run); i++ {
		if run[i] == run[i-1]+1 {
			steps++
		}
	}
	return steps > len(run)/2
}

func isBase64(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '/' || c == '-' || c == '_'
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
