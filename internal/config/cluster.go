package config

import (
	"fmt"
	"net"
	"net/netip"
	"net/url"
	"os"
	"strings"
	"time"

	"github.com/tmux-amq/tamq/internal/textsafe"
)

// Cluster is the engine's [cluster] section: the etcd cluster that several
// hosts watching one State Hub share, so that a task has one live claim
// across machines (internal/cluster). Only coordination-engine reads it.
// The section is off while etcd_endpoints is empty; then it stays all zero
// and out of `config show` and the version hash. Secrets never live here:
// the etcd user and password come from credential_command when the engine
// connects, and are kept in memory only.
type Cluster struct {
	EtcdEndpoints []string `toml:"etcd_endpoints" json:"etcd_endpoints,omitempty"`
	// HostID names this host in the claims it takes; os.Hostname() by
	// default. Two hosts with one id would take each other's claims for
	// their own.
	HostID string `toml:"host_id" json:"host_id,omitempty"`
	// Prefix is where the engine's keys live in etcd, so that one etcd may
	// serve other programs (or several engine fleets) too.
	Prefix      string `toml:"prefix" json:"prefix,omitempty"`
	TLSCAFile   string `toml:"tls_ca_file" json:"tls_ca_file,omitempty"`
	TLSCertFile string `toml:"tls_cert_file" json:"tls_cert_file,omitempty"`
	TLSKeyFile  string `toml:"tls_key_file" json:"tls_key_file,omitempty"`
	// CredentialCommand is an argv whose standard output is one line,
	// "user:password" (the user name cannot hold a colon in etcd's
	// etcdctl --user syntax either, so the first colon splits them).
	CredentialCommand  []string `toml:"credential_command" json:"credential_command,omitempty"`
	DialTimeoutSeconds int      `toml:"dial_timeout_seconds" json:"dial_timeout_seconds,omitempty"`
}

// The defaults of [cluster], filled in when the section is on.
const (
	DefaultClusterPrefix      = "/tamq-coordination"
	DefaultClusterDialTimeout = 5 // seconds
	maxClusterDialTimeout     = 300
	maxClusterEndpoints       = 32
)

// IsZero says whether nothing of the section is set: omitzero (JSON and
// TOML) leaves such a section out. A hand-written test, because an empty
// list set in the file (etcd_endpoints = []) counts as unset too.
func (c Cluster) IsZero() bool {
	return len(c.EtcdEndpoints) == 0 && c.HostID == "" && c.Prefix == "" && c.TLSCAFile == "" &&
		c.TLSCertFile == "" && c.TLSKeyFile == "" && len(c.CredentialCommand) == 0 && c.DialTimeoutSeconds == 0
}

// On says whether the section is on: it names at least one etcd endpoint.
func (c Cluster) On() bool { return len(c.EtcdEndpoints) > 0 }

// DialTimeout bounds connecting to etcd, and each call made to it.
func (c Cluster) DialTimeout() time.Duration {
	if c.DialTimeoutSeconds == 0 {
		return DefaultClusterDialTimeout * time.Second
	}
	return time.Duration(c.DialTimeoutSeconds) * time.Second
}

// TLS says whether the engine speaks TLS to etcd: https endpoints or any
// TLS file set.
func (c Cluster) TLS() bool {
	return c.TLSCAFile != "" || c.TLSCertFile != "" ||
		(len(c.EtcdEndpoints) > 0 && strings.HasPrefix(c.EtcdEndpoints[0], "https://"))
}

// ClusterOn reports whether the engine shares its claims through etcd.
func (c *Config) ClusterOn() bool { return c.Cluster.On() }

// fillDefaults sets the defaults of an on section, so that `config show`
// prints what the engine uses. host_id comes from hostname (os.Hostname);
// it stays empty, and validation says so, when that fails. A host's own
// name is then part of the version hash, as every effective value is.
func (c *Cluster) fillDefaults(hostname func() (string, error)) {
	if !c.On() {
		return
	}
	if c.HostID == "" {
		if h, err := hostname(); err == nil {
			c.HostID = h
		}
	}
	if c.Prefix == "" {
		c.Prefix = DefaultClusterPrefix
	}
	if c.DialTimeoutSeconds == 0 {
		c.DialTimeoutSeconds = DefaultClusterDialTimeout
	}
}

var osHostname = os.Hostname

// validate checks what is set of the section; when it is on, host_id and
// prefix must be there too (Load fills in their defaults).
func (c Cluster) validate() error {
	if len(c.EtcdEndpoints) > maxClusterEndpoints {
		return bad("cluster.etcd_endpoints", "%d endpoints; at most %d", len(c.EtcdEndpoints), maxClusterEndpoints)
	}
	scheme := ""
	for i, e := range c.EtcdEndpoints {
		s, host, err := checkEndpoint(e)
		if err != nil {
			return bad("cluster.etcd_endpoints", "entry %d: %v", i+1, err)
		}
		if scheme != "" && s != scheme {
			return bad("cluster.etcd_endpoints", "mixes %s:// and %s://; one cluster speaks one of them", scheme, s)
		}
		scheme = s
		// The password goes to etcd in its first request: over plain
		// http to another machine, anyone on the way reads it.
		if s == "http" && len(c.CredentialCommand) > 0 && !LoopbackHost(host) {
			return bad("cluster.etcd_endpoints", "entry %d: %q is http:// to %s, which is not this machine, and cluster.credential_command is set: "+
				"the etcd password would cross the network in clear; use https:// (with cluster.tls_ca_file), or an etcd on this machine (127.0.0.1 or unix://)",
				i+1, e, host)
		}
	}
	if scheme != "https" && (c.TLSCAFile != "" || c.TLSCertFile != "" || c.TLSKeyFile != "") {
		return bad("cluster.etcd_endpoints", "tls_* files are set but the endpoints are %s://; write them as https://", scheme)
	}
	if (c.TLSCertFile == "") != (c.TLSKeyFile == "") {
		return bad("cluster.tls_cert_file", "tls_cert_file and tls_key_file go together: set both (a client certificate) or neither")
	}
	for _, f := range []struct{ key, path string }{
		{"cluster.tls_ca_file", c.TLSCAFile}, {"cluster.tls_cert_file", c.TLSCertFile}, {"cluster.tls_key_file", c.TLSKeyFile},
	} {
		if f.path != "" && !strings.HasPrefix(f.path, "/") {
			return bad(f.key, "%q must be an absolute path", f.path)
		}
	}
	if len(c.CredentialCommand) > 0 && c.CredentialCommand[0] == "" {
		return bad("cluster.credential_command", "the program name (first element) is empty")
	}
	if d := c.DialTimeoutSeconds; d < 0 || d > maxClusterDialTimeout {
		return bad("cluster.dial_timeout_seconds", "%d is out of range 1..%d", d, maxClusterDialTimeout)
	}
	if c.Prefix != "" || c.On() {
		if err := checkPrefix(c.Prefix); err != nil {
			return bad("cluster.prefix", "%v", err)
		}
	}
	if c.HostID != "" || c.On() {
		if err := checkHostID(c.HostID); err != nil {
			return bad("cluster.host_id", "%v", err)
		}
	}
	return nil
}

// checkEndpoint accepts http(s)://host:port with nothing else (no
// credentials, path, query), the form etcd's client dials, or
// unix:///path, a socket of etcd on this machine. It returns the scheme and
// the host ("" for a socket).
func checkEndpoint(raw string) (scheme, host string, err error) {
	u, err := url.Parse(raw)
	if err == nil && u.Scheme == "unix" {
		if u.Host != "" || !strings.HasPrefix(u.Path, "/") || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
			return "", "", fmt.Errorf("%q must be unix:// and a socket's absolute path, as unix:///run/etcd/etcd.sock", textsafe.RedactURL(raw))
		}
		return "unix", "", nil
	}
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return "", "", fmt.Errorf("%q must be http://host:port, https://host:port or unix:///path", textsafe.RedactURL(raw))
	}
	if u.User != nil {
		return "", "", fmt.Errorf("%q must not contain credentials; use cluster.credential_command", textsafe.RedactURL(raw))
	}
	if (u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.Fragment != "" {
		return "", "", fmt.Errorf("%q must be only a scheme, host and port", textsafe.RedactURL(raw))
	}
	if _, port, err := net.SplitHostPort(u.Host); err != nil || port == "" {
		return "", "", fmt.Errorf("%q has no port (etcd's client port is usually 2379)", textsafe.RedactURL(raw))
	}
	return u.Scheme, u.Hostname(), nil
}

// LoopbackHost reports whether host names this machine's loopback
// interface: "localhost", 127.0.0.0/8 or ::1.
func LoopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	a, err := netip.ParseAddr(host)
	return err == nil && a.Unmap().IsLoopback()
}

// checkPrefix accepts an absolute key path, as "/tamq-coordination": the
// claims are keys under <prefix>/tasks/.
func checkPrefix(p string) error {
	switch {
	case p == "":
		return fmt.Errorf("is empty; leave the key out for %q", DefaultClusterPrefix)
	case !strings.HasPrefix(p, "/") || p == "/":
		return fmt.Errorf("%q must start with / and name something, as %q", p, DefaultClusterPrefix)
	case strings.HasSuffix(p, "/"):
		return fmt.Errorf("%q must not end with /", p)
	case len(p) > 256:
		return fmt.Errorf("is longer than 256 bytes")
	case strings.ContainsFunc(p, func(r rune) bool { return r <= ' ' || r == 0x7f }):
		return fmt.Errorf("%q must not hold blanks or control characters", p)
	}
	return nil
}

// checkHostID accepts a host's name as hosts name themselves: printable,
// without blanks or a slash (it becomes part of a key).
func checkHostID(h string) error {
	switch {
	case h == "":
		return fmt.Errorf("is empty and the host's name is unknown (os.Hostname failed); set it")
	case len(h) > 255:
		return fmt.Errorf("is longer than 255 bytes")
	case strings.ContainsFunc(h, func(r rune) bool { return r <= ' ' || r == 0x7f || r == '/' }):
		return fmt.Errorf("%q must not hold blanks, control characters or /", h)
	}
	return nil
}
