package cluster

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"os"
	"os/exec"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/errs"
)

// credentialTimeout bounds cluster.credential_command: a password manager
// may take a moment, not for ever.
const credentialTimeout = 30 * time.Second

// Credentials runs the credential command (cluster.credential_command) until
// ctx ends and returns the user and password of the one line it prints,
// "user:password" (split at the first colon; etcd user names hold none).
// The output is never put in an error: it is the secret.
func Credentials(ctx context.Context, argv []string) (user, password string, err error) {
	if len(argv) == 0 || argv[0] == "" {
		return "", "", errs.New(errs.ConfigInvalid, "cluster.credential_command is empty")
	}
	out, err := exec.CommandContext(ctx, argv[0], argv[1:]...).Output()
	if err != nil {
		// Output's error is the exit status (or the program not found),
		// never the output itself.
		return "", "", errs.Wrap(errs.PermissionDeny, err, "cluster.credential_command %q failed", argv[0])
	}
	line := strings.TrimRight(string(out), "\r\n")
	user, password, ok := strings.Cut(line, ":")
	if !ok || user == "" || password == "" || strings.ContainsAny(line, "\r\n") {
		return "", "", errs.New(errs.PermissionDeny, "cluster.credential_command %q did not print one line user:password", argv[0]).
			WithHint("run it yourself: it must print user:password and nothing else")
	}
	return user, password, nil
}

// tlsConfig is the TLS of the connection: none for http endpoints, the
// system's roots or the CA file, and the client certificate when set.
func tlsConfig(cfg Config) (*tls.Config, error) {
	https := strings.HasPrefix(cfg.Endpoints[0], "https://")
	if !https && cfg.TLSCAFile == "" && cfg.TLSCertFile == "" {
		return nil, nil
	}
	t := &tls.Config{MinVersion: tls.VersionTLS12}
	if cfg.TLSCAFile != "" {
		pem, err := os.ReadFile(cfg.TLSCAFile)
		if err != nil {
			return nil, errs.Wrap(errs.ConfigInvalid, err, "cluster.tls_ca_file")
		}
		t.RootCAs = x509.NewCertPool()
		if !t.RootCAs.AppendCertsFromPEM(pem) {
			return nil, errs.New(errs.ConfigInvalid, "cluster.tls_ca_file %s holds no PEM certificate", cfg.TLSCAFile)
		}
	}
	if cfg.TLSCertFile != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCertFile, cfg.TLSKeyFile)
		if err != nil {
			return nil, errs.Wrap(errs.ConfigInvalid, err, "cluster.tls_cert_file and tls_key_file")
		}
		t.Certificates = []tls.Certificate{cert}
	}
	return t, nil
}
