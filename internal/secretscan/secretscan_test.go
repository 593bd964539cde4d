package secretscan

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/tmux-amq/tamq/internal/prompt"
)

// The fake secrets are put together at run time, so this file holds no
// string that looks like a token to other scanners.
func cat(parts ...string) string { return strings.Join(parts, "") }

var (
	alnum36 = strings.Repeat("aB3dE6gH9k", 4)[:36]
	upper16 = "Q7WX2MZ4K3TR5VYP" // AWS key ids hold A-Z and 2-7
	awsKey  = cat("AK", "IA", upper16)
	ghToken = cat("gh", "p_", alnum36)
	// random40 is 40 characters of base64 from crypto/rand, as an AWS
	// secret access key is, fixed here so a failure can be reproduced.
	random40 = cat("q7Jd0v+Lw2", "N9sXbE4t/RkYh", "3GmZ6cUa1PfVi", "o8TnW5C")
)

func TestScanFindsEachRule(t *testing.T) {
	tests := []struct {
		rule, text string
		offset     int
	}{
		{"private-key", cat("key:\n-----BEGIN ", "OPENSSH PRIVATE", " KEY-----\nb3Blbn..."), 5},
		{"private-key", cat("-----BEGIN ", "RSA PRIVATE", " KEY-----"), 0},
		{"private-key", cat("-----BEGIN ", "EC PRIVATE", " KEY-----"), 0},
		{"private-key", cat("-----BEGIN ", "PRIVATE", " KEY-----"), 0},
		{"private-key", cat("-----BEGIN ", "PGP PRIVATE", " KEY BLOCK-----"), 0},
		{"aws-access-token", "id " + awsKey + " here", 3},
		{"aws-access-token", cat("AS", "IA", upper16), 0},
		{"github-pat", "use " + ghToken, 4},
		{"github-app-token", cat("gh", "s_", alnum36), 0},
		{"github-fine-grained-pat", cat("github", "_pat_", "11ABCDEFG0", strings.Repeat("123456789_abcdefghijKLMNOP", 3)[:72]), 0},
		{"slack-bot-token", cat("xo", "xb-", "1234567890-", "1234567890", "abcdefABCDEF"), 0},
		{"openai-api-key", cat("sk", "-", "T3Blbk", alnum36), 0},
		{"openai-api-key", cat("key=sk", "-proj-", "ab_cd-", alnum36), 4},
		{"anthropic-api-key", cat("sk", "-ant-", "api03-", alnum36), 0},
		{"gcp-api-key", cat("AI", "za", "Sy", "Zq8Lm2Xv9Bn4Tk7P", "w1Sr5Yc3Hd6Jf0Gu_"), 0},
		{"stripe-access-token", cat("sk", "_live_", alnum36[:24]), 0},
		{"stripe-access-token", cat("rk", "_live_", alnum36[:24]), 0},
		{"jwt", cat("Bearer ", "eyJ", "hbGciOiJIUzI1NiJ9x9", ".", "eyJ", "zdWIiOiIxMjM0NTY3ODkwIn0", ".", "dozjgNryP4J3jVmNHl0w", "5N_XgL0n3I9PlFUP0THsR8U"), 7},
		{"secret-assignment", cat(`api_key="`, "q8Zr2LmX9vB4nT7kP1sW", `"`), 0},
		{"secret-assignment", cat("export GITLAB_TOKEN=", "glp8Zr2LmX9vB4nT7kP1"), 7},
		{"secret-assignment", cat(`{"client_secret": "`, "Zr2LmX9vB4nT7kP1sW8q", `"}`), 2},
		{"secret-assignment", cat("db_password: ", "Tr0ub4dor&3xyz"), 0},
		{"generic-api-key", cat("AccessKey := ", "wJalrXUtnFEMI7K7MDENG"), 13}, // a name secret-assignment does not take
		{"secret-assignment", cat("aws_access_key = ", "wJalrXUtnFEMI7K7MDENG"), 0},
		{"secret-assignment", cat("PWD=", "wJalrXUtnFEMI7K7MDENG"), 0},
		{"secret-assignment", cat("credentials:", "wJalrXUtnFEMI7K7MDENG"), 0},
	}
	for _, tt := range tests {
		f, ok := Scan(tt.text)
		if tt.offset < 0 {
			if ok {
				t.Errorf("Scan(%s text) = %v, want no hit", tt.rule, f)
			}
			continue
		}
		if !ok || f.Rule != tt.rule || f.Offset != tt.offset {
			t.Errorf("Scan(%s text) = %v, %v; want %s at byte %d", tt.rule, f, ok, tt.rule, tt.offset)
		}
	}
}

func TestScanReportsTheEarliestHit(t *testing.T) {
	text := "first " + ghToken + " then " + awsKey
	if f, ok := Scan(text); !ok || f.Rule != "github-pat" || f.Offset != 6 {
		t.Errorf("Scan = %v, %v; want github-pat at byte 6", f, ok)
	}
	text = "first " + awsKey + " then " + ghToken
	if f, ok := Scan(text); !ok || f.Rule != "aws-access-token" || f.Offset != 6 {
		t.Errorf("Scan = %v, %v; want aws-access-token at byte 6", f, ok)
	}
}

func TestScanLeavesOrdinaryTextAlone(t *testing.T) {
	texts := []string{
		"",
		"commit 3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c fixed the parser",
		"uuid 550e8400-e29b-41d4-a716-446655440000 and lease 0193a4f2-7b1c-7d3e-9f20-4a5b6c7d8e9f",
		"coordination-engine lease ack 0193a4f2-7b1c-7d3e-9f20-4a5b6c7d8e9f",
		"coordination-engine lease ack L",
		"The token bucket refills every second; a secret handshake is not a password.",
		"Pass the token to the next stage, then rotate the secret keys by hand.",
		"Password: Confidential",
		"The token: Authentication happens upstream.",
		"password = hunter2",
		"password = hunter2hunter2",
		"token: <placeholder>",
		"token: <your-api-token-goes-here>",
		"TOKEN=$TOKEN",
		"GITHUB_TOKEN=${GITHUB_TOKEN}",
		"secret=${SECRET}",
		"api_key: {{ .Values.apiKey }}",
		"token := os.Getenv(\"GITHUB_TOKEN\")",
		"secret = base64.StdEncoding.EncodeToString(raw2)",
		"token_file=/home/me/.config/tokens/gh2.txt",
		"secret_path: ./secrets/prod2/key.pem",
		"credentials: secrets/prod2/service.json",
		"api_key = xxxxxxxxxxxxxxxxxxxx",
		"token_count: 12345678901234",
		"max_tokens=4096 and password_min_length=12",
		"internal/engine/prompt/prompt.go:42: ask-for-review risk-assessment task-7",
		"sk-learn-style-pipeline-names-are-not-keys",
		"ASIAN cuisine and AKIAnine are words",
		"/usr/local/bin/coordination-engine --config ~/.config/coordination-engine/config.toml",
	}
	for _, s := range texts {
		if f, ok := Scan(s); ok {
			t.Errorf("Scan(%q) = %v, want no hit", s, f)
		}
	}
}

func TestScanLeavesTheEnginesPromptAlone(t *testing.T) {
	for _, text := range []string{ordinaryPrompt(), benchText()} {
		if f, ok := Scan(text); ok {
			t.Errorf("Scan(prompt) = %v, want no hit; around it: %q", f, text[f.Offset:min(len(text), f.Offset+40)])
		}
	}
}

// A finding must never carry the secret, however it is printed.
func TestFindingNeverShowsTheSecret(t *testing.T) {
	secret := cat("q8Zr2LmX9", "vB4nT7kP1sW")
	for _, text := range []string{"api_key=" + secret, ghToken, awsKey} {
		f, ok := Scan(text)
		if !ok {
			t.Fatalf("no finding in a text with a secret")
		}
		for _, format := range []string{"%v", "%+v", "%#v", "%s", "%q"} {
			out := fmt.Sprintf(format, f)
			for _, s := range []string{secret, ghToken, awsKey, text} {
				if strings.Contains(out, s) || strings.Contains(out, s[:8]) {
					t.Errorf("Finding printed with %s shows the secret: %s", format, out)
				}
			}
		}
		if want := fmt.Sprintf("%s at byte %d", f.Rule, f.Offset); f.String() != want {
			t.Errorf("String() = %q, want %q", f.String(), want)
		}
	}
}

func TestEntropy(t *testing.T) {
	for _, tt := range []struct {
		s    string
		want float64
	}{{"", 0}, {"aaaa", 0}, {"abab", 1}, {"abcd", 2}, {"abcdefgh", 3}} {
		if got := entropy(tt.s); got != tt.want {
			t.Errorf("entropy(%q) = %v, want %v", tt.s, got, tt.want)
		}
	}
}

func ordinaryPrompt() string {
	return prompt.Build(prompt.Input{
		Program: "coordination-engine", LeaseID: "0193a4f2-7b1c-7d3e-9f20-4a5b6c7d8e9f", Attempt: 1, MaxAttempts: 5, Repo: "net-kingdom",
		Trigger: prompt.Trigger{Source: "task", SourceID: "T-42", SourceRevision: "7", Reason: "task_actionable"},
		Task:    &prompt.Task{ID: "T-42", Title: "Rotate the API token handling in the auth middleware", Workplan: "WP-3"},
		Message: &prompt.Message{ID: "M-9", Subject: "password reset flow review", From: "railiance-platform"},
		Checkpoint: &prompt.Checkpoint{
			Summary:      "Parser done; the secret store client still reads the token from the environment. Next the CLI.",
			NextAction:   "wire the CLI flags --token-file and --api-base",
			FilesChanged: []string{"internal/auth/token.go", "internal/auth/secret_store.go", "cmd/app/main.go"},
			RecordedAt:   time.Unix(1_700_000_000, 0),
		},
	})
}

// benchText is 8 KiB of ordinary prompt: the engine's prompt, then prose
// and the kind of notes a checkpoint carries.
func benchText() string {
	prose := "\nThe parser now keeps a token stream per file and hands it to the checker; " +
		"commit 3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c moved the password policy into config " +
		"(max_tokens=4096, see docs/configuration.md). Lease 0193a4f2-7b1c-7d3e-9f20-4a5b6c7d8e9f " +
		"was acknowledged at 2024-05-01T10:00:00Z; the secret rotation stays with a human. " +
		"Files: internal/engine/prompt/prompt.go, internal/secretscan/secretscan.go."
	var b strings.Builder
	b.WriteString(ordinaryPrompt())
	for b.Len() < 8*1024 {
		b.WriteString(prose)
	}
	return b.String()[:8*1024]
}

var sink any

// BenchmarkScan8KiBPrompt is the scan of an 8 KiB prompt, as the engine
// runs it twice per wake and on every message body, release reason and
// checkpoint. It reports the scan's own time (docs/performance.md keeps
// the scanner before the gitleaks port's figures, measured beside it until
// issue 41 removed that scanner).
func BenchmarkScan8KiBPrompt(b *testing.B) {
	text := benchText()
	if _, ok := Scan(text); ok {
		b.Fatal("the benchmark's prompt has a finding")
	}
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_, ok := Scan(text)
		sink = ok
	}
}

// The fake secrets of the tests are put together at run time (cat) from
// parts none of which is a finding itself, so that other scanners run on
// this repository report nothing in its test files.
func TestTestFilesHoldNoWholeSecret(t *testing.T) {
	files, err := filepath.Glob("*_test.go")
	if err != nil || len(files) == 0 {
		t.Fatalf("no test files: %v", err)
	}
	literals := 0
	for _, name := range files {
		file, err := parser.ParseFile(token.NewFileSet(), name, nil, 0)
		if err != nil {
			t.Fatal(err)
		}
		ast.Inspect(file, func(n ast.Node) bool {
			lit, ok := n.(*ast.BasicLit)
			if !ok || lit.Kind != token.STRING {
				return true
			}
			s, err := strconv.Unquote(lit.Value)
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
			literals++
			if f, ok := Scan(s); ok {
				t.Errorf("%s holds a whole secret (%v) in %s", name, f, lit.Value)
			}
			return true
		})
	}
	if literals < 1000 {
		t.Errorf("only %d string literals in the test files", literals)
	}
}

// everyKeywordText is 8 KiB of prompt whose lines name every rule's
// keywords in prose ("the datadog exporter, the sentry client"), so that
// every rule's regexp runs on it: the scan's worst case short of a hit.
func everyKeywordText() string {
	var words []string
	for _, r := range rules() {
		words = append(words, r.keywords...)
	}
	var b strings.Builder
	b.WriteString(ordinaryPrompt())
	for i := 0; b.Len() < 8*1024; i += 10 {
		b.WriteString("\nThe")
		for j := range 10 {
			fmt.Fprintf(&b, " %s,", words[(i+j)%len(words)])
		}
		b.WriteString(" clients moved to internal/vendors at commit 3f9a1c2e4b5d6f708192a3b4c5d6e7f8091a2b3c.")
	}
	return b.String()[:8*1024]
}

func TestScanLeavesProseNamingEveryKeywordAlone(t *testing.T) {
	text := everyKeywordText()
	if f, ok := Scan(text); ok {
		t.Fatalf("Scan = %v, want no hit; around it: %q", f, text[max(0, f.Offset-40):min(len(text), f.Offset+40)])
	}
	if n := len(keywordHits(text)); n < len(rules())*9/10 {
		t.Errorf("the text wakes %d of %d rules", n, len(rules()))
	}
}

// BenchmarkScanEveryKeyword is the scan of 8 KiB whose lines name every
// rule's keywords, so that every rule's regexp runs.
func BenchmarkScanEveryKeyword(b *testing.B) {
	text := everyKeywordText()
	b.SetBytes(int64(len(text)))
	for b.Loop() {
		_, ok := Scan(text)
		sink = ok
	}
}

// BenchmarkCompileAllRules is what compiling every rule costs (the regexps
// the scan uses: its anchored form, or else its regexp as it is, and its
// allowlists), which the scan never pays at once: it compiles a rule on
// the first text holding one of its keywords.
func BenchmarkCompileAllRules(b *testing.B) {
	for b.Loop() {
		c := make([]compiledRule, len(rules()))
		for i := range rules() {
			if c[i].get(&rules()[i]).atKeyword == nil {
				c[i].unanchored(&rules()[i])
			}
		}
	}
}
