package secretscan

// The rules marked "gitleaks" are ported from gitleaks v8.30.1
// (github.com/gitleaks/gitleaks, config/gitleaks.toml and
// cmd/generate/config/rules/*.go): its rule ids, regexes, keywords and
// entropy limits, copyright (c) 2019 Zachary Rice, under the MIT license in
// GITLEAKS-LICENSE beside this file. We port a table of them instead of
// linking gitleaks: the library brings viper, archive readers and some 60
// modules into coordination-engine (22.8 MB to 31.5 MB) and runs about 200
// rules, some 10 ms on an 8 KiB prompt.
//
// Changes to the ported rules, each for a prompt rather than a repository:
//   - tokenEnd also accepts , . ) ] } > after a token: prose ends a
//     sentence or a parenthesis right after a key, where source code has a
//     quote or a blank;
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
//     Authentication happens upstream").
// The rules marked "tamq" are ours: basic-auth URLs, private-key bodies
// without their header, and (in secretscan.go) the secret assignment and
// the entropy check.

// tokenEnd is gitleaks' secretSuffix (what may follow a token), widened by
// the characters prose ends a token with.
const tokenEnd = `(?:[\x60'"\s;,.)\]}>]|\\[nr]|$)`

// rule is one kind of secret. keywords are lower case and looked for in the
// lowered text: the regexp runs only when one occurs, so an ordinary prompt
// costs a few strings.Contains calls per rule, not a regexp pass. The first
// capture group that matched, if any, is the secret (else the whole match);
// it must have at least entropy bits per byte, letters and digits when
// mixed, and must not match allow (a placeholder or a documented example).
type rule struct {
	id       string
	keywords []string
	pattern  string
	entropy  float64
	mixed    bool
	allow    string
}

// rules are tried all; the earliest hit wins, and at equal offsets the
// earlier rule (anthropic-api-key before openai-api-key, gitlab-pat-routable
// before gitlab-pat).
var rules = []rule{
	// gitleaks private-key (BEGIN line only, see above).
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
	{id: "slack-config-access-token", keywords: []string{"xoxe.xoxb-", "xoxe.xoxp-"}, pattern: `(?i)xoxe.xox[bp]-\d-[A-Z0-9]{163,166}`, entropy: 2},
	{id: "slack-config-refresh-token", keywords: []string{"xoxe-"}, pattern: `(?i)xoxe-\d-[A-Z0-9]{146}`, entropy: 2},
	{id: "slack-legacy-bot-token", keywords: []string{"xoxb"}, pattern: `xoxb-[0-9]{8,14}-[a-zA-Z0-9]{18,26}`, entropy: 2},
	{id: "slack-legacy-token", keywords: []string{"xoxo", "xoxs"}, pattern: `xox[os]-\d+-\d+-\d+-[a-fA-F\d]+`, entropy: 2},
	{id: "slack-legacy-workspace-token", keywords: []string{"xoxa", "xoxr"}, pattern: `xox[ar]-(?:\d-)?[0-9a-zA-Z]{8,48}`, entropy: 2},
	{id: "slack-webhook-url", keywords: []string{"hooks.slack.com"}, pattern: `(?:https?://)?hooks.slack.com/(?:services|workflows|triggers)/[A-Za-z0-9+/]{43,56}`},

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

	// tamq: credentials in a URL, scheme://user:password@host. A password
	// that is a placeholder or a variable is not a secret.
	{id: "basic-auth-url", keywords: []string{"://"},
		pattern: `\b[A-Za-z][A-Za-z0-9+.-]{1,20}://[^\s:@/?#'"\x60<>]{1,100}:([^\s:@/?#'"\x60<>]{1,100})@[A-Za-z0-9\[]`,
		allow:   `(?i)^(?:\*+|x+|\.+|pass(?:word)?|passwd|pwd|secret|token|changeme|changeit|[$%<{].*)$`},
}
