package textsafe

import (
	"net/url"
	"strings"
)

// Redacted stands where a secret was in a printed URL.
const Redacted = "REDACTED"

// secretParams are the names (and name parts) of query parameters that carry
// a secret: a token, key, password or signature in the URL itself.
var secretParams = []string{"token", "key", "pass", "secret", "sig", "auth", "credential", "session", "code"}

// RedactURL returns raw fit to print: the whole userinfo (a user name can be
// a token too, as in https://TOKEN@host) becomes REDACTED, and so does the
// value of every query or fragment parameter whose name looks like a secret
// (token, access_token, api_key, password, secret, sig...). Every place that
// prints an address the user gave (State Hub, etcd, GitHub's API root) goes
// through it: configuration checks refuse such URLs, but their messages,
// doctor's fixes and status must not repeat the secret they refuse. A string
// that does not parse as a URL is redacted by its shape: everything between
// "//" and the last "@" before the path, and the secret parameters.
func RedactURL(raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		return redactShape(raw)
	}
	if u.User != nil {
		u.User = url.User(Redacted)
	}
	u.RawQuery = redactParams(u.RawQuery)
	if u.Fragment != "" {
		// An OAuth implicit grant hands its token over in the fragment.
		u.RawFragment = redactParams(u.EscapedFragment())
		u.Fragment, _ = url.PathUnescape(u.RawFragment)
	}
	return u.String()
}

// redactShape redacts a string url.Parse refused, by its shape alone.
func redactShape(raw string) string {
	s := raw
	if i := strings.Index(s, "//"); i >= 0 {
		rest := s[i+2:]
		end := strings.IndexAny(rest, "/?#")
		if end < 0 {
			end = len(rest)
		}
		if at := strings.LastIndex(rest[:end], "@"); at >= 0 {
			s = s[:i+2] + Redacted + rest[at:]
		}
	}
	if q := strings.IndexAny(s, "?#"); q >= 0 {
		s = s[:q+1] + redactParams(s[q+1:])
	}
	return s
}

// redactParams replaces the values of the secret-looking parameters of a
// query (a=1&b=2), keeping the others and their order as written.
func redactParams(q string) string {
	if q == "" {
		return q
	}
	parts := strings.FieldsFunc(q, func(r rune) bool { return r == '&' || r == ';' })
	for i, p := range parts {
		name, _, hasValue := strings.Cut(p, "=")
		if hasValue && secretParam(name) {
			parts[i] = name + "=" + Redacted
		}
	}
	return strings.Join(parts, "&")
}

func secretParam(name string) bool {
	if n, err := url.QueryUnescape(name); err == nil {
		name = n
	}
	name = strings.ToLower(name)
	for _, s := range secretParams {
		if strings.Contains(name, s) {
			return true
		}
	}
	return false
}
