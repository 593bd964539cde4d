package secretscan

import (
	"crypto/rand"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/uuid"

	"github.com/tmux-amq/tamq/internal/prompt"
)

// The ten shapes the scan before the gitleaks port let through, each in
// the words an agent would write it.
func TestScanFindsTheShapesTheOldScanMissed(t *testing.T) {
	tests := []struct{ name, rule, text string }{
		{"bearer header", "authorization-header", cat("curl -H 'Authorization: Bearer ", "k3Jd9sLq2Vx7Pz4Tb8Wn5Rc1", "' https://api.example.com")},
		{"basic-auth URL", "basic-auth-url", cat("clone https://deploy:", "s3cr3tPa55", "@git.example.com/org/repo.git")},
		{"GitLab glpat-", "gitlab-pat", cat("use gl", "pat-", "Zq8Lm2Xv9Bn4Tk7Pw1Sr")},
		{"npm_", "npm-access-token", cat("publish with ", "npm_", "q8zr2lmx9vb4nt7kp1sw5yc3hd6jf0gue4a2", " then")},
		{"Hugging Face hf_", "huggingface-access-token", cat("HF_TOKEN=", "hf_", "jCBaQngSHiHDRYOcsMcifUcysGyaiybUWz", " python app.py")},
		{"SendGrid SG.", "sendgrid-api-token", cat("key ", "SG.", "q8Zr2LmX9vB4nT7kP1sW5y", ".", "c3Hd6Jf0GuE4a2Qw8Er6Ty1Ui5Op9As3Df7Gh2Jk4Lz")},
		{"OpenSSH key body without its header", "private-key-body", cat("b3BlbnNzaC1rZXktdjE", "AAAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW")},
		{"PEM key body without its header", "private-key-body", cat("MIIEow", "IBAAKCAQEAn6/O8li+SX4m98LLYt/PKSzEmQ++ZBD7Loh9P13f4yQ92EF3")},
		{"bare AWS secret access key", "high-entropy-base64", "the secret key is in the note: " + random40},
		{"password is …", "secret-assignment", cat("the staging password is ", "Tr0ub4dor&3xyz")},
		{"fullwidth PASSWORD＝", "secret-assignment", cat("PASSWORD\uff1d", "wJalrXUtnFEMI7K7MDENG")},
	}
	for _, tt := range tests {
		if f, ok := Scan(tt.text); !ok || f.Rule != tt.rule {
			t.Errorf("%s: Scan = %v, %v; want %s", tt.name, f, ok, tt.rule)
		}
	}
}

// Offsets are into the text as given, not into its normalized form.
func TestScanOffsetsAreIntoTheTextAsGiven(t *testing.T) {
	for _, tt := range []struct {
		text string
		want int
	}{
		{cat("pré ", "db_password\uff1d", "wJalrXUtnFEMI7K7MDENG"), len("pré ")},
		{cat("ｆｕｌｌ ", "gh", "p_", alnum36), len("ｆｕｌｌ ")},
		{cat("\uff47\uff48\uff50\uff3f", alnum36), 0}, // fullwidth "ghp_"
		{cat("zero\u200bwidth ", "gh", "p\u200b_", alnum36), len("zero\u200bwidth ")},
	} {
		if f, ok := Scan(tt.text); !ok || f.Offset != tt.want {
			t.Errorf("Scan(%q) = %v, %v; want a hit at byte %d", tt.text, f, ok, tt.want)
		}
	}
}

func TestScanLeavesOrdinaryProseCodeAndIdsAlone(t *testing.T) {
	sha := sha1.Sum([]byte("commit"))
	digest := sha256.Sum256([]byte("image"))
	texts := []string{
		"The password is stored in the vault; the token is valid for an hour.",
		"The password is Confidential and the token is unavailable.",
		"Bearer authentication is done by the gateway, see the auth middleware.",
		"Authorization: required for every request to the admin routes.",
		"the cache key: user42profile is rebuilt nightly",
		"Token: Authentication happens upstream.",
		"postgres://user:password@localhost:5432/app and https://me:${DB_PASS}@db.internal/x",
		"redis://:****@cache:6379 and ssh://git@github.com/org/repo.git and git@github.com:org/repo",
		"see https://github.com/tmux-amq/tamq/blob/" + hex.EncodeToString(sha[:]) + "/internal/engine/Service2/leases.go",
		"commit " + hex.EncodeToString(sha[:]) + " and " + strings.ToUpper(hex.EncodeToString(sha[:])),
		"image digest sha256:" + hex.EncodeToString(digest[:]),
		"uuid 550E8400-E29B-41D4-A716-446655440000",
		"AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA==",
		base64.StdEncoding.EncodeToString([]byte(strings.Repeat("ab", 40))),
		"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/",
		"backups/tamq-v1-20260504T091240Z.sqlite3 in local/state/tamq/backups/tamq-v1-20260504T091240Z.sqlite3",
		"func TestReplayRefusesLinesThatAreNotUTF8(t *testing.T) { TestMigrationFromV1KeepsMessages(t) }",
		"for i := 0; i < len(s); i++ { if s[i] == '=' { key := s[:i]; value := s[i+1:] } }",
		`cfg := Config{Token: os.Getenv("TOKEN"), Password: cfg.Password, Secret: nil}`,
		"aws_access_key: AKIAIOSFODNN7EXAMPLE",
		"msgstr \"N\u00e4yt\u00e4 asiakirjamallikansio.\"",
	}
	for _, s := range texts {
		if f, ok := Scan(s); ok {
			t.Errorf("Scan(%q) = %v, want no hit", s, f)
		}
	}
}

// Lease ids (UUIDv7) and commit ids are in every prompt: however they come
// out, they must not trip the entropy check.
func TestScanLeavesLeaseIdsAndCommitIdsAlone(t *testing.T) {
	for range 2000 {
		lease := uuid.Must(uuid.NewV7()).String()
		var raw [20]byte
		rand.Read(raw[:])
		sha := hex.EncodeToString(raw[:])
		text := fmt.Sprintf("lease %s at commit %s; coordination-engine lease release %s --attempt 1\n%s%s", lease, sha, lease, sha, lease)
		if f, ok := Scan(text); ok {
			t.Fatalf("Scan(%q) = %v, want no hit", text, f)
		}
	}
}

// The entropy check finds random base64 of 40 characters (an AWS secret
// access key) nearly always, and a hex key only when no hash is that long.
func TestEntropyCheck(t *testing.T) {
	missed := 0
	for range 2000 {
		var raw [30]byte
		rand.Read(raw[:])
		if _, ok := highEntropy(base64.StdEncoding.EncodeToString(raw[:])); !ok {
			missed++
		}
	}
	if missed > 20 { // about 0.1% have no digit or a low entropy draw
		t.Errorf("the entropy check missed %d of 2000 random 40-character base64 keys", missed)
	}
	var raw [24]byte
	rand.Read(raw[:])
	for _, tt := range []struct {
		run, rule string
	}{
		{random40, "high-entropy-base64"},
		{hex.EncodeToString(raw[:]), "high-entropy-hex"}, // 48 hex digits: no hash is that long
		{strings.Repeat("0", 48), ""},
		{strings.Repeat("ab12", 12), ""},
		{hex.EncodeToString(raw[:20]), ""}, // a SHA-1's length
		{strings.Repeat("aB3dE6gH9k", 4), ""},
	} {
		if got := judgeRun(tt.run); got != tt.rule {
			t.Errorf("judgeRun(%q) = %q, want %q", tt.run, got, tt.rule)
		}
	}
}

// The standard prompt, with real ids and the policy text, passes clean, as
// does one with a checkpoint full of paths and commit ids.
func TestScanLeavesTheStandardPromptAlone(t *testing.T) {
	for range 200 {
		lease := uuid.Must(uuid.NewV7()).String()
		var raw [20]byte
		rand.Read(raw[:])
		text := prompt.Build(prompt.Input{
			Program: "coordination-engine", LeaseID: lease, Attempt: 2, MaxAttempts: 5, Repo: "railiance-platform",
			Trigger: prompt.Trigger{Source: "checkpoint", SourceID: "cp-" + lease, SourceRevision: lease, Reason: "checkpoint_resume"},
			Task:    &prompt.Task{ID: "T-1042", Title: "Migrate the session store to SQLite WAL mode", Workplan: "WP-2026-05"},
			Checkpoint: &prompt.Checkpoint{
				Summary:      "Tests pass at commit " + hex.EncodeToString(raw[:]) + "; internal/engine/store/leases_test.go covers the retry path. Token refresh still to do.",
				NextAction:   "run make test, then release the lease",
				FilesChanged: []string{"internal/engine/store/leases.go", "internal/engine/store/schema.go", "docs/operations.md"},
				RecordedAt:   time.Now(),
			},
		})
		if f, ok := Scan(text); ok {
			t.Fatalf("Scan(prompt) = %v, want no hit; around it: %q", f, text[f.Offset:min(len(text), f.Offset+60)])
		}
	}
}
