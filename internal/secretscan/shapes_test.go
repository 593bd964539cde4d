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
		{"SendGrid SG.", "sendgrid-api-token", cat("key ", "SG.", "q8Zr2LmX9vB4nT7kP1sW5y", ".", "c3Hd6Jf0GuE4a2Qw8Er6T", "y1Ui5Op9As3Df7Gh2Jk4Lz")},
		{"OpenSSH key body without its header", "private-key-body", cat("b3BlbnNzaC1rZXktdjE", "AAAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW")},
		{"PEM key body without its header", "private-key-body", cat("MIIEow", "IBAAKCAQEAn6/O8li+SX4m98LLYt", "/PKSzEmQ++ZBD7Loh9P13f4yQ92EF3")},
		{"bare AWS secret access key", "high-entropy-base64", "aws configure asked for it; pasted " + random40},
		{"AWS secret access key in prose", "generic-api-key", "the secret key is in the note: " + random40},
		{"password is …", "secret-assignment", cat("the staging password is ", "Tr0ub4dor&3xyz")},
		{"fullwidth PASSWORD＝", "secret-assignment", cat("PASSWORD\uff1d", "wJalrXUtnFEMI7K7MDENG")},
	}
	for _, tt := range tests {
		if f, ok := Scan(tt.text); !ok || f.Rule != tt.rule {
			t.Errorf("%s: Scan = %v, %v; want %s", tt.name, f, ok, tt.rule)
		}
	}
}

// Fake secrets of the shapes below, random once and fixed here.
var (
	hex64 = cat("d2ccb6a8abc698b24a862ee2c25474cd", "7eb5f74c7ae1f5840f2ad8b6c80d9f27")
	hex32 = cat("a0b86d4d968ef10b", "867355a551ded16b")
	uuid4 = "623a33ed-ff9e-4bb7-b95e-c551adbd71ab"
)

// The ten shapes a review (issue 37) found the scan let through, into a
// release reason published to the tracker and a prompt typed into a
// terminal; each as a config, a command line or a prompt holds it, found
// by its rule alone and by the scan.
func TestScanFindsTheShapesTheReviewFound(t *testing.T) {
	tests := []struct{ name, rule, text string }{
		{"mysql -p", "mysql-password", cat("mysql -u root -p", "S3cretPassw0rd", " db")},
		{"DigitalOcean dop_v1_", "digitalocean-pat", cat("doctl auth init -t ", "dop", "_v1_", hex64)},
		{"curl -u user:password", "curl-auth-user", cat("curl -u admin:", "hunter2secret", " https://api.example.com/v1/status")},
		{"--password", "password-option", cat("./deploy.sh --user ops --password ", "Hunter2Secret!", " --host prod-db-1")},
		{"sshpass -p", "sshpass-password", cat("sshpass -p '", "Tr0ub4dor&3", "' ssh deploy@10.0.0.5 uptime")},
		{"redis URL with only a password", "basic-auth-url", cat("redis-cli -u redis://:", "S3cretRedisPass", "@cache.internal:6379/0 ping")},
		{"Shopify shpat_", "shopify-access-token", cat("use ", "shp", "at_", hex32, " for the Admin API")},
		{"Square sq0atp-", "square-access-token", cat("the sandbox access token sq0", "atp-", "Zq8Lm2Xv9Bn4Tk7Pw1Sr5Y")},
		{"Mailgun key-", "mailgun-private-api-token", cat("send it with ", "ke", "y-", hex32, " from the Mailgun dashboard")},
		{"Mailgun key- after its name", "mailgun-private-api-token", cat("mailgun: ", "ke", "y-", hex32)},
		{"Heroku API key", "heroku-api-key", cat("export HEROKU_KEY=", uuid4)},
		{"Heroku API key in YAML", "heroku-api-key", cat("heroku_key: \"", uuid4, "\"")},
	}
	for _, tt := range tests {
		if !ruleHits(t, tt.rule, tt.text) {
			t.Errorf("%s: %s does not find the secret in %q", tt.name, tt.rule, tt.text)
		}
		if f, ok := Scan(tt.text); !ok {
			t.Errorf("%s: Scan = %v, %v; want a hit", tt.name, f, ok)
		}
	}
}

// tamq's own rules (rules.go), alone: what each must find and what it must
// leave alone.
var tamqTruePositives = map[string][]string{
	"private-key-body": {
		cat("b3BlbnNzaC1rZXktdjE", "AAAAAAABG5vbmUAAAAEbm9uZQAAAAAAAAABAAAAMwAAAAtzc2gtZW"),
		cat("MIIEow", "IBAAKCAQEAn6/O8li+SX4m98LLYt", "/PKSzEmQ++ZBD7Loh9P13f4yQ92EF3"),
	},
	"authorization-header": {
		cat("use Bearer ", "k3Jd9sLq2Vx7Pz4Tb8Wn5Rc1", " for the staging API"),
	},
	"basic-auth-url": {
		cat("clone https://deploy:", "s3cr3tPa55", "@git.example.com/org/repo.git"),
		cat("REDIS_URL=redis://:", "S3cretRedisPass", "@cache.internal:6379/0"),
	},
	"mysql-password": {
		cat("mysql -u root -p", "S3cretPassw0rd", " db"),
		cat("mysqldump -h db.internal -uapp -p'", "s3cr3t pass", "' app > app.sql"),
		cat("mariadb --user=app --password=", "hunter2", " app"),
		cat("mysql -uroot -p", "root"),
	},
	"sshpass-password": {
		cat("sshpass -p '", "Tr0ub4dor&3", "' ssh deploy@10.0.0.5 uptime"),
		cat("sshpass -v -p", "hunter2", " scp backup.tar deploy@10.0.0.5:"),
	},
	"password-option": {
		cat("./deploy.sh --user ops --password ", "Hunter2Secret!", " --host prod-db-1"),
		cat("restic --repo s3:backups --password=", "c0rrect-horse", " snapshots"),
		cat("tool login --api-key \"", "q8Zr2LmX9vB4nT7k", "\""),
		cat("run it with --db-password '", "p@ss w0rd", "' once"),
		cat("--auth-token ", "7f3a9c1e5b"),
	},
	"mailgun-private-api-token": {
		cat("send it with ", "ke", "y-", hex32, " from the Mailgun dashboard"),
		cat("(", "ke", "y-", hex32, ")"),
	},
}

var tamqFalsePositives = map[string][]string{
	"basic-auth-url": {
		"redis://:****@cache:6379 and redis://:${REDIS_PASSWORD}@cache:6379",
		"postgres://user:password@localhost:5432/app and https://me:${DB_PASS}@db.internal/x",
		"ssh://git@github.com/org/repo.git and http://localhost:8080/@admin",
	},
	"mysql-password": {
		"run mysql -u root -p and type the password when asked",
		"mysql -h db -P 3306 -u app -p app_db",
		"mysql -u root -p\"$MYSQL_ROOT_PASSWORD\" app",
		"mysql -u root -p${DB_PASS} app",
		"mysql -u root -p<password> app",
		"mysql -u root -pPASSWORD app",
		"mysql -u root -p*** app",
		"the mysql-python package has a -python suffix",
		"mysql -u app app_db < dump.sql | ssh backup -p2222 store",
	},
	"sshpass-password": {
		"sshpass -f ~/.ssh/deploy.pw ssh -p 2222 deploy@10.0.0.5",
		"sshpass -e ssh deploy@10.0.0.5",
		"sshpass -p \"$SSHPASS\" ssh deploy@10.0.0.5",
		"sshpass -p <password> ssh deploy@10.0.0.5",
	},
	"password-option": {
		"pass --token and a file to the command",
		"the --password flag reads the password from stdin",
		"use --token-file ~/.config/tamq/token instead",
		"wire the CLI flags --token-file and --api-base",
		"--api-key YOUR_API_KEY",
		"--password=<password>",
		"--password \"$DB_PASSWORD\"",
		"--token ${GITHUB_TOKEN}",
		"--token $(gh auth token)",
		"--password [PASSWORD]",
		"--password ...",
		"--secret-store vault and --token-ttl 3600",
		"--token ~/.config/gh/hosts.yml",
		"--password --verbose",
		"--password Password",
		"--api-key api-key-from-vault",
	},
	"mailgun-private-api-token": {
		cat("cache-", "ke", "y-", "d41d8cd98f00b204e9800998ecf8427e"),
		cat("ke", "y-", "0123456789abcdef0123456789abcdef0"),
		cat("ke", "y-", "ffffffffffffffffffffffffffffffff"),
	},
}

func TestScanTamqRules(t *testing.T) {
	for id, texts := range tamqTruePositives {
		for _, text := range texts {
			if !ruleHits(t, id, text) {
				t.Errorf("%s does not find the secret in %q", id, text)
			}
		}
	}
	for id, texts := range tamqFalsePositives {
		for _, text := range texts {
			if ruleHits(t, id, text) {
				t.Errorf("%s finds a secret in %q", id, text)
			}
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

// A vendor's name or a secret word in prose before a commit id, a digest
// or a UUID (as a checkpoint says "the Datadog fix is in commit: <sha>")
// is not a rule's NAME: VALUE (gitleaks' rules take it so); the same id
// after a config name is.
func TestScanLeavesIdsAfterVendorNamesAlone(t *testing.T) {
	sha := sha1.Sum([]byte("commit"))
	digest := sha256.Sum256([]byte("image"))
	lease := "0193a4f2-7b1c-7d3e-9f20-4a5b6c7d8e9f"
	for _, text := range []string{
		"the Datadog fix is in commit: " + hex.EncodeToString(sha[:]),
		"Sentry release digest: " + hex.EncodeToString(digest[:]),
		"Meraki sync, " + hex.EncodeToString(sha[:]) + ", then the Zendesk import at " + strings.ToUpper(hex.EncodeToString(sha[:])),
		"Heroku deploy lease: " + lease,
		"sourcegraph search at commit: " + hex.EncodeToString(sha[:]),
		"the auth step, " + uuid4 + " is its request id",
		"the API call: " + uuid4,
	} {
		if f, ok := Scan(text); ok {
			t.Errorf("Scan(%q) = %v, want no hit", text, f)
		}
	}
	for _, tt := range []struct{ rule, text string }{
		{"datadog-access-token", "DATADOG_APP_KEY=" + hex.EncodeToString(sha[:])},
		{"sentry-access-token", "sentry.auth: " + hex.EncodeToString(digest[:])},
		{"heroku-api-key", "HEROKU_KEY=" + lease},
	} {
		if !ruleHits(t, tt.rule, tt.text) {
			t.Errorf("%s does not find the secret in %q", tt.rule, tt.text)
		}
	}
}
