package secretscan

// The rules marked "gitleaks" here, and all of gitleaks_rules.go, are
// ported from gitleaks v8.30.1 (github.com/gitleaks/gitleaks, tag v8.30.1,
// commit 83d9cd68: config/gitleaks.toml, and cmd/generate/config/rules/*.go
// for the test strings): rule ids, regexes, keywords, entropy minimums,
// secret groups, allowlists and stopwords, and the global allowlist and
// stopwords (globalAllow); copyright (c) 2019 Zachary Rice, under the MIT
// license in GITLEAKS-LICENSE beside this file. 217 of its 222 rules are
// here (anthropic-admin-api-key within anthropic-api-key), as 226 table
// entries with tamq's own.
//
// A Go table, not gitleaks linked or its gitleaks.toml embedded. Linking
// brings viper, archive readers and some 60 modules into
// coordination-engine (22.8 MB to 31.5 MB) and runs every rule on a
// prompt that names its keyword, some 10 ms for 8 KiB. Embedding the TOML
// (98 KB, parsed with go-toml, already a dependency: 0.6 ms and 184 KB
// allocated) would cost about what the table does (the engine grows by
// 219 KB with this change), but the changes below would then be string
// surgery on gitleaks' regexes at init, out of sight of review and tests;
// the table shows each. The cost that matters is compiling: all of the
// rules' regexps take some 20 ms and 11 MB allocated
// (BenchmarkCompileAllRules). So the table is built on first use (table)
// and a rule compiles on the first text holding one of its keywords: the
// first scan of an 8 KiB prompt takes 1 ms, against 3 ms before (when the
// 38 rules compiled at once), and a rule is tried only where its keywords
// are (searchIn).
//
// Left out: the rules that hold only in one kind of file, which a prompt
// has no path to tell: pkcs12-file (a path alone), freemius-secret-key
// (.php), hashicorp-tf-password (.tf, .hcl), kubernetes-secret-yaml
// (.yaml) and nuget-config-password (nuget.config). anthropic-admin-api-key
// is anthropic-api-key here (widened, below).
//
// Changes, each for a prompt rather than a repository:
//   - tokenEnd, gitleaks' secretSuffix, also accepts , ) ] } > and a full
//     stop before a blank or the end after a token: prose ends a sentence
//     or a parenthesis right after a key, where source code has a quote or
//     a blank (a dot before a letter is a file name's, ico-<hex>.png);
//   - semiGeneric leaves out the [\w.-]{0,50}? before the vendor's name,
//     which changes no secret nor offset (see there);
//   - a semi-generic rule (named) takes a commit id, a digest or a UUID
//     only after a NAME of one word, not after prose ("the Datadog fix is
//     in commit: <sha>"): gitleaks' rules take them, and a prompt holds
//     lease ids, commit ids and checkpoint prose;
//   - the global allowlist's (?i)^true|false|null$ is grouped as it means,
//     ^(?:true|false|null)$ (as written it allows any secret with "false"
//     inside);
//   - private-key needs the BEGIN line only: a prompt cut at its limit may
//     hold the header without the END line, and the header alone is enough
//     reason to hold the text back;
//   - anthropic-api-key and openai-api-key are wider than gitleaks' (any
//     sk-ant- key; a project, service-account or admin key of any length; a
//     legacy key without the T3BlbkFJ marker), as the rules they replace
//     here were;
//   - authorization-header is gitleaks' curl-auth-header without the curl
//     command before it; its value must hold letters and digits, and a
//     header named only Key or Token does not count (prose says "Token:
//     Authentication happens upstream"). curl-auth-header is there too, as
//     gitleaks has it;
//   - the dots of slack-config-access-token's prefix and of
//     slack-webhook-url's and sidekiq-sensitive-url's hosts are escaped, so
//     that every match holds its keyword (searchIn looks for matches near
//     keywords only); sidekiq-sensitive-url's URL may also end with a blank
//     (gitleaks' $ is the end of the whole text);
//   - sourcegraph-access-token takes a bare 40-hex token only after the
//     name sourcegraph (gitleaks takes any 40 hex digits, every commit id,
//     once "sourcegraph" is in the text); it and atlassian-api-token, one
//     regexp of two forms in gitleaks, are two rules each, with the
//     keywords of each form;
//   - lob-*, new-relic-*-key, new-relic-browser-api-token and
//     typeform-api-token have the vendor's name as a keyword too, so that
//     they are tried where the name is (the same findings: a match holds
//     both);
//   - microsoft-teams-webhook's repeated groups do not capture, so that its
//     secret is the URL, not four characters of it;
//   - generic-api-key comes last, so that a rule naming the vendor wins at
//     equal offsets; its allowlist of Yocto recipe paths has no path to
//     apply to.
//
// The rules marked "tamq" are ours: basic-auth URLs (scheme://user:pass@,
// the user possibly empty), private-key bodies without their header, a
// bearer token outside a header, passwords on command lines (mysql -p,
// sshpass -p, --password and the like), Mailgun's key- without the word
// mailgun; and, in secretscan.go and entropy.go, the secret assignment and
// the entropy check.

import (
	"regexp"
	"strings"
	"sync"
)

// tokenEnd is gitleaks' secretSuffix (what may follow a token), widened by
// the characters prose ends a token with: , ) ] } > and a full stop that
// ends a sentence (a dot before a letter is a file name's: ico-<hex>.png).
const tokenEnd = `(?:[\x60'"\s;,)\]}>]|\.(?:\s|$)|\\[nr]|$)`

// rule is one kind of secret. keywords are lower case and looked for in the
// lowered text: the regexp runs only when one occurs, and only where (see
// searchIn), so an ordinary prompt costs a pass over the text for all
// rules' keywords, not a regexp pass per rule. The secret is the capture
// group numbered group, or with group 0 the first capture group that
// matched something, or else the whole match; it must have at least
// entropy bits per byte, letters and digits when mixed, must not match
// allow (a placeholder or a documented example), allowMatch, allowLine,
// stopwords nor gitleaks' global allowlist (globalAllow), and must pass
// valid when set.
type rule struct {
	id       string
	keywords []string
	pattern  string
	entropy  float64
	mixed    bool
	allow    string
	// allowMatch and allowLine are allowlists too, on the whole match (as
	// gitleaks' regexTarget "match") and on its lines ("line"); stopwords
	// are words (lower case) a secret holding one is not a key with.
	allowMatch, allowLine string
	stopwords             []string
	group                 int
	// named marks gitleaks' "semi-generic" rules (a semiGeneric pattern and
	// nothing else), NAME OPERATOR VALUE with a vendor's name or a secret
	// word in NAME. A VALUE shaped like the ids every prompt holds
	// (idShaped: commit ids, digests, UUIDs such as lease ids) counts only
	// after a NAME of one word (DATADOG_APP_KEY=, sentry.token:), not after
	// prose ("the Datadog fix is in commit: 3f9a...", "the API call:
	// <uuid>"); and searchIn skips a keyword no operator follows closely
	// enough (operatorNear).
	named bool
	valid func(secret string) bool
	// anywhere marks a rule whose keywords need not be in its match (the
	// keyword airtable for an Airtable token pat...): its regexp searches
	// the whole text, not the lines around the keywords (see searchIn).
	anywhere bool
}

// semiGeneric is gitleaks' GenerateSemiGenericRegex (a vendor's name, up
// to 20 more name characters, an assignment operator, the secret) without
// its leading [\w.-]{0,50}?, which only widens the match to the start of
// a longer name: the secret and its offset are the same without it, every
// match then starts with the vendor's name (a keyword, where searchIn
// tries it), and the regexp does not carry up to fifty threads through
// every word of a text. An allowlist on the whole match sees it from where
// gitleaks' match would start (matchStart).
func semiGeneric(identifiers, secret string, caseInsensitive bool) string {
	const (
		nameRest = `(?:[ \t\w.-]{0,20})[\s'"]{0,3}`
		operator = `(?:=|>|:{1,3}=|\|\||:|=>|\?=|,)`
		open     = `[\x60'"\s=]{0,5}(`
	)
	if caseInsensitive {
		return `(?i)(?:` + identifiers + `)` + nameRest + operator + open + secret + `)` + tokenEnd
	}
	return `(?i:(?:` + identifiers + `)` + nameRest + `)` + operator + open + secret + `)` + tokenEnd
}

// uniqueToken is gitleaks' GenerateUniqueTokenRegex, a token told by its
// own shape (a prefix such as dop_v1_), with tokenEnd for its suffix.
func uniqueToken(secret string, caseInsensitive bool) string {
	flags := ""
	if caseInsensitive {
		flags = `(?i)`
	}
	return flags + `\b(` + secret + `)` + tokenEnd
}

// rules are tried all (those whose keywords occur); the earliest hit wins,
// and at equal offsets the earlier rule (anthropic-api-key before
// openai-api-key, gitlab-pat-routable before gitlab-pat, the rules here
// before gitleaksRules, generic-api-key last).
func rules() []rule { return table().rules }

// table is the rules and their compiled forms (see compiledRule), built on
// first use: coordination-engine links this package into every command,
// and building the table allocates some 90 KB, which a command that scans
// nothing should not pay.
var table = sync.OnceValue(func() *ruleTable {
	t := &ruleTable{rules: append(handRules(), gitleaksRules()...)}
	t.compiled = make([]compiledRule, len(t.rules))
	if len(t.rules) > maxRules {
		panic("secretscan: more rules than maxRules")
	}
	return t
})

type ruleTable struct {
	rules    []rule
	compiled []compiledRule
}

// handRules returns the gitleaks rules ported by hand (some changed, see
// the header) and tamq's own.
func handRules() []rule {
	return []rule{
		// gitleaks private-key (the BEGIN line only, see above).
		{id: "private-key", keywords: []string{"-----begin"}, pattern: `(?i)-----BEGIN[ A-Z0-9_-]{0,100}PRIVATE KEY(?: BLOCK)?-----`},
		// tamq: the base64 body of a private key without its BEGIN line, told
		// by how the key's encoding starts: OpenSSH's "openssh-key-v1" magic;
		// DER SEQUENCE then version 0 (PKCS#1 RSA, PKCS#8: "MII..IBA", "MIG.AgEA");
		// SEC1 EC ("MHcCAQEE"); PKCS#8 Ed25519 ("MC4CAQAwBQYDK2Vw"). A
		// certificate starts "MII..CC" and does not match.
		{id: "private-key-body", keywords: []string{"b3blbnnzac1rzxktdje", "mii", "mig", "mhccaqee", "mc4caqaw"},
			pattern: `\b(?:b3BlbnNzaC1rZXktdjE[A-Za-z0-9+/]{20,}|MII[A-Za-z0-9+/]{3}IBA[A-Za-z0-9+/]{40,}|MIG[A-Za-z0-9+/]AgEA[A-Za-z0-9+/]{40,}|MHcCAQEE[A-Za-z0-9+/]{40,}|MC4CAQAwBQYDK2Vw[A-Za-z0-9+/]{20,})`},

		// gitleaks aws-access-token, with its allowlist (AWS's documented
		// example keys end in EXAMPLE).
		{id: "aws-access-token", keywords: []string{"a3t", "akia", "asia", "abia", "acca"},
			pattern: `\b((?:A3T[A-Z0-9]|AKIA|ASIA|ABIA|ACCA)[A-Z2-7]{16})\b`, entropy: 3, allow: `.+EXAMPLE$`},

		// gitleaks github-*.
		{id: "github-pat", keywords: []string{"ghp_"}, pattern: `ghp_[0-9a-zA-Z]{36}`, entropy: 3},
		{id: "github-fine-grained-pat", keywords: []string{"github_pat_"}, pattern: `github_pat_\w{82}`, entropy: 3},
		{id: "github-oauth", keywords: []string{"gho_"}, pattern: `gho_[0-9a-zA-Z]{36}`, entropy: 3},
		{id: "github-app-token", keywords: []string{"ghu_", "ghs_"}, pattern: `(?:ghu|ghs)_[0-9a-zA-Z]{36}`, entropy: 3},
		{id: "github-refresh-token", keywords: []string{"ghr_"}, pattern: `ghr_[0-9a-zA-Z]{36}`, entropy: 3},

		// gitleaks gitlab-*.
		{id: "gitlab-pat-routable", keywords: []string{"glpat-"}, pattern: `\bglpat-[0-9a-zA-Z_-]{27,300}\.[0-9a-z]{2}[0-9a-z]{7}\b`, entropy: 4},
		{id: "gitlab-pat", keywords: []string{"glpat-"}, pattern: `glpat-[\w-]{20}`, entropy: 3},
		{id: "gitlab-ptt", keywords: []string{"glptt-"}, pattern: `glptt-[0-9a-f]{40}`, entropy: 3},
		{id: "gitlab-rrt", keywords: []string{"gr1348941"}, pattern: `GR1348941[\w-]{20}`, entropy: 3},
		{id: "gitlab-deploy-token", keywords: []string{"gldt-"}, pattern: `gldt-[0-9a-zA-Z_\-]{20}`, entropy: 3},
		{id: "gitlab-runner-authentication-token", keywords: []string{"glrt-"}, pattern: `glrt-[0-9a-zA-Z_\-]{20}`, entropy: 3},

		// gitleaks slack-*.
		{id: "slack-bot-token", keywords: []string{"xoxb"}, pattern: `xoxb-[0-9]{10,13}-[0-9]{10,13}[a-zA-Z0-9-]*`, entropy: 3},
		{id: "slack-user-token", keywords: []string{"xoxp-", "xoxe-"}, pattern: `xox[pe](?:-[0-9]{10,13}){3}-[a-zA-Z0-9-]{28,34}`, entropy: 2},
		{id: "slack-app-token", keywords: []string{"xapp"}, pattern: `(?i)xapp-\d-[A-Z0-9]+-\d+-[a-z0-9]+`, entropy: 2},
		{id: "slack-config-access-token", keywords: []string{"xoxe.xoxb-", "xoxe.xoxp-"}, pattern: `(?i)xoxe\.xox[bp]-\d-[A-Z0-9]{163,166}`, entropy: 2},
		{id: "slack-config-refresh-token", keywords: []string{"xoxe-"}, pattern: `(?i)xoxe-\d-[A-Z0-9]{146}`, entropy: 2},
		{id: "slack-legacy-bot-token", keywords: []string{"xoxb"}, pattern: `xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}`, entropy: 2},
		{id: "slack-legacy-token", keywords: []string{"xoxo", "xoxs"}, pattern: `xox[os]-\d+-\d+-\d+-[a-fA-F\d]+`, entropy: 2},
		{id: "slack-legacy-workspace-token", keywords: []string{"xoxa", "xoxr"}, pattern: `xox[ar]-(?:\d-)?[0-9a-zA-Z]{8,48}`, entropy: 2},
		{id: "slack-webhook-url", keywords: []string{"hooks.slack.com"}, pattern: `(?:https?://)?hooks\.slack\.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}`},

		// gitleaks stripe-access-token.
		{id: "stripe-access-token", keywords: []string{"sk_test", "sk_live", "sk_prod", "rk_test", "rk_live", "rk_prod"},
			pattern: `\b((?:sk|rk)_(?:test|live|prod)_[a-zA-Z0-9]{10,99})` + tokenEnd, entropy: 2},

		// gitleaks gcp-api-key (without its allowlist of example keys published
		// by Firebase: holding one back costs nothing).
		{id: "gcp-api-key", keywords: []string{"aiza"}, pattern: `\b(AIza[\w-]{35})` + tokenEnd, entropy: 4},

		// gitleaks azure-ad-client-secret.
		{id: "azure-ad-client-secret", keywords: []string{"q~"},
			pattern: `(?:^|[\\'"\x60\s>=:(,)])([a-zA-Z0-9_~.]{3}\dQ~[a-zA-Z0-9_~.-]{31,34})(?:$|[\\'"\x60\s<),.])`, entropy: 3},

		// gitleaks anthropic-api-key and anthropic-admin-api-key, widened.
		{id: "anthropic-api-key", keywords: []string{"sk-ant-"}, pattern: `\bsk-ant-[A-Za-z0-9_-]{20,}`, entropy: 3},
		// gitleaks openai-api-key, widened: its keys all match this.
		{id: "openai-api-key", keywords: []string{"sk-"}, pattern: `\bsk-(?:proj|svcacct|admin)-[A-Za-z0-9_-]{20,}|\bsk-[A-Za-z0-9]{32,}`, entropy: 3},

		// gitleaks npm-access-token, pypi-upload-token, huggingface-*,
		// sendgrid-api-token, twilio-api-key, jwt.
		{id: "npm-access-token", keywords: []string{"npm_"}, pattern: `(?i)\b(npm_[a-z0-9]{36})` + tokenEnd, entropy: 2},
		{id: "pypi-upload-token", keywords: []string{"pypi-ageichlwas5vcmc"}, pattern: `pypi-AgEIcHlwaS5vcmc[\w-]{50,1000}`, entropy: 3},
		{id: "huggingface-access-token", keywords: []string{"hf_"}, pattern: `\b(hf_(?i:[a-z]{34}))` + tokenEnd, entropy: 2},
		{id: "huggingface-organization-api-token", keywords: []string{"api_org_"}, pattern: `\b(api_org_(?i:[a-z]{34}))` + tokenEnd, entropy: 2},
		{id: "sendgrid-api-token", keywords: []string{"sg."}, pattern: `\b(SG\.(?i)[a-z0-9=_\-\.]{66})` + tokenEnd, entropy: 2},
		{id: "twilio-api-key", keywords: []string{"sk"}, pattern: `SK[0-9a-fA-F]{32}`, entropy: 3},
		{id: "jwt", keywords: []string{"ey"}, pattern: `\b(ey[a-zA-Z0-9]{17,}\.ey[a-zA-Z0-9\/\\_-]{17,}\.(?:[a-zA-Z0-9\/\\_-]{10,}={0,2})?)` + tokenEnd, entropy: 3},

		// gitleaks curl-auth-header without "curl ... -H": an Authorization
		// header (Basic, Bearer, Token or bare) or an X-...-Key, X-...-Token or
		// Api-Key header. gitleaks also takes a bare "Key:" or "Token:", safe
		// after "curl -H" but common in prose ("the cache key: user42").
		{id: "authorization-header", keywords: []string{"authorization", "key:", "token:"}, entropy: 2.75, mixed: true,
			pattern: `(?i)(?:Authorization:[ \t]{0,5}(?:Basic[ \t]([a-z0-9+/]{8,}={0,3})|(?:Bearer|(?:Api-)?Token)[ \t]([\w=~@.+/-]{8,})|([\w=~@.+/-]{8,}))|(?:X-(?:[a-z]+-)?(?:Api-?)?|Api-?)(?:Key|Token):[ \t]{0,5}([\w=~@.+/-]{8,}))`},
		// tamq: a bearer token outside a header line ("use Bearer <token>").
		{id: "authorization-header", keywords: []string{"bearer"}, entropy: 3, mixed: true, pattern: `\b(?i:bearer)[ \t]+([\w~+/-]{16,}={0,2})`},

		// tamq: credentials in a URL, scheme://user:password@host, the user
		// possibly empty (redis://:password@host). A password that is a
		// placeholder or a variable is not a secret.
		{id: "basic-auth-url", keywords: []string{"://"},
			pattern: `\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:@/?#'"\x60<>]{0,100}:([^\s:@/?#'"\x60<>]{1,100})@[A-Za-z0-9\[]`,
			allow:   `(?i)^(?:\*+|x+|\.+|pass(?:word)?|passwd|pwd|secret|token|changeme|changeit|[$%<{].*)$`},

		// tamq: a password given to a MySQL or MariaDB client on its command
		// line, -pPASSWORD or --password=PASSWORD (mysql -p alone asks for it),
		// among the command's options (each maybe with a value), not further on
		// the line (| ssh -p2222).
		{id: "mysql-password", keywords: []string{"mysql", "mariadb"}, valid: notPlaceholder,
			pattern: `\b(?:mysql|mariadb)[\w-]{0,10}(?:[ \t]+-\S+(?:[ \t]+[^\s-]\S*)?)*?[ \t]+(?:-p|--password=)` + cliValue},
		// tamq: sshpass -p PASSWORD (or -pPASSWORD), after sshpass's other
		// options only: a -p further on is the command's (ssh -p PORT).
		{id: "sshpass-password", keywords: []string{"sshpass"}, valid: notPlaceholder,
			pattern: `\bsshpass(?:[ \t]+-(?:[fdP][ \t]*\S+|[evhV]))*[ \t]+-p[ \t]*` + cliValue},
		// tamq: a long command-line option whose name ends in a secret word,
		// --password X, --db-password=X, --api-key X, --auth-token X. Prose
		// names such options too ("pass --token and a file"), so the value must
		// look like a password (passwordLike), not a word, a variable, a path or
		// another option.
		{id: "password-option", keywords: []string{"--"}, valid: passwordLike,
			pattern: `--(?i:(?:[a-z0-9]+[-_.])*(?:password|passwd|passphrase|pass|pwd|secret|token|api[-_]?key|access[-_]?key|secret[-_]?key))(?:=|[ \t]+)` + cliValue},
		// tamq: Mailgun's private API key alone (gitleaks' rule, in
		// gitleaks_rules.go, wants the word mailgun before it): key- and 32 hex
		// digits, not inside a longer name (cache-key-<md5>).
		{id: "mailgun-private-api-token", keywords: []string{"key-"}, entropy: 3, mixed: true,
			pattern: `(?:^|[^\w-])(key-[a-f0-9]{32})\b`},
	}
}

// cliValue is a command-line argument: quoted in double or single quotes,
// or a run of characters that are neither blank nor quotes.
const cliValue = `(?:"([^"\n]+)"|'([^'\n]+)'|([^\s"'\x60]+))`

// placeholder is what a command line holds where its password is not
// written out: a variable ($PASS, ${PASS}, %PASS%), a <placeholder> or
// [placeholder], a word that names the value (password, secret), stars or
// x's, a command substitution.
var placeholder = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`(?i)^(?:[$%<\[{(].*|\*+|x+|\.+|pass(?:word)?|passwd|pwd|secret|token|changeme|changeit|your[-_].*)$`)
})

// notPlaceholder passes a command line's password unless it is a
// placeholder.
func notPlaceholder(secret string) bool { return !placeholder().MatchString(secret) }

// passwordLike tells the value of a --password or --token option from the
// words prose puts after such an option: at least six characters, not a
// placeholder, not another option or a path, and holding a digit or a
// symbol (a word, an ENV_NAME or kebab-case name has none).
func passwordLike(secret string) bool {
	if len(secret) < 6 || !notPlaceholder(secret) || strings.HasPrefix(secret, "-") || isPath(secret) {
		return false
	}
	return strings.IndexFunc(secret, func(r rune) bool {
		return r >= '0' && r <= '9' || !(r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r == '-' || r == '_' || r == '.')
	}) >= 0
}
