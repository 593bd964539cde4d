// Package paths works out where each program keeps its config, state and socket:
// XDG base directories by default, overridden by environment variables.
package paths

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"

	"github.com/tmux-amq/tamq/internal/errs"
)

// Program names one of the two programs; it picks the file names and variables.
type Program string

const (
	Tamq   Program = "tamq"
	Engine Program = "coordination-engine"
)

// vars are the environment variables that override a program's defaults.
type vars struct{ config, stateDir, socket, profile string }

var programVars = map[Program]vars{
	Tamq:   {"TAMQ_CONFIG", "TAMQ_STATE_DIR", "TAMQ_SOCKET", "TAMQ_POLICY_PROFILE"},
	Engine: {"COORDINATION_ENGINE_CONFIG", "COORDINATION_ENGINE_STATE_DIR", "COORDINATION_ENGINE_SOCKET", "COORDINATION_ENGINE_POLICY_PROFILE"},
}

var databaseNames = map[Program]string{Tamq: "tamq.sqlite3", Engine: "coordination.sqlite3"}

// StateHubAPIBaseVar overrides statehub.api_base for both programs.
const StateHubAPIBaseVar = "STATEHUB_API_BASE"

// Paths are the resolved locations of one program. Nothing here exists yet
// necessarily: directories are created only when something is written.
type Paths struct {
	Program Program `json:"program"`

	ConfigFile string `json:"config_file"`
	// ConfigVar names the variable that chose ConfigFile, or "" for the default.
	ConfigVar string `json:"config_var,omitempty"`

	StateDir  string `json:"state_dir"`
	Database  string `json:"database"`
	LogFile   string `json:"log_file"`
	BackupDir string `json:"backup_dir"`
	LockFile  string `json:"lock_file"`
	// StartLockFile serializes concurrent starts of the service.
	StartLockFile string `json:"start_lock_file"`
	// OpenLockFile serializes the opening of windows, so concurrent opens of
	// one repo leave one window.
	OpenLockFile string `json:"open_lock_file"`
	// OrwellLog is the separate 0600 sink of --orwell diagnostics.
	OrwellLog string `json:"orwell_log"`

	Socket string `json:"socket"`
	// TamqSocket is where coordination-engine reaches tamq (equal to Socket for tamq).
	TamqSocket string `json:"tamq_socket"`
	// StateHubSocket is where the reference State Hub (coordination-engine
	// dev-statehub) listens by default, beside the sockets of both programs;
	// statehub.api_base points there unless set.
	StateHubSocket string `json:"statehub_socket"`
	// PrivateDir is the per-user directory that holds the sockets when
	// XDG_RUNTIME_DIR is unset (see PrivateRuntimeDir), "" otherwise. Every
	// program checks it on every use, as tmux checks /tmp/tmux-<uid>.
	PrivateDir string `json:"private_dir,omitempty"`

	// PolicyProfile and StateHubAPIBase are the environment's overrides, "" when unset.
	PolicyProfile    string `json:"-"`
	PolicyProfileVar string `json:"-"`
	StateHubAPIBase  string `json:"-"`
}

// Resolve computes a program's paths from the environment (getenv is os.Getenv
// outside tests).
func Resolve(p Program, getenv func(string) string) (Paths, error) {
	v, ok := programVars[p]
	if !ok {
		return Paths{}, errs.New(errs.Internal, "unknown program %q", p)
	}
	configHome, err := xdgDir(getenv, "XDG_CONFIG_HOME", ".config")
	if err != nil {
		return Paths{}, err
	}
	stateHome, err := xdgDir(getenv, "XDG_STATE_HOME", filepath.Join(".local", "state"))
	if err != nil {
		return Paths{}, err
	}
	runtimeDir, private := getenv("XDG_RUNTIME_DIR"), ""
	if !filepath.IsAbs(runtimeDir) {
		runtimeDir = PrivateRuntimeDir(getenv)
		private = runtimeDir
	}

	out := Paths{
		Program:          p,
		ConfigFile:       filepath.Join(configHome, string(p), "config.toml"),
		StateDir:         filepath.Join(stateHome, string(p)),
		Socket:           filepath.Join(runtimeDir, string(p)+".sock"),
		TamqSocket:       filepath.Join(runtimeDir, string(Tamq)+".sock"),
		StateHubSocket:   filepath.Join(runtimeDir, "statehub.sock"),
		PrivateDir:       private,
		PolicyProfile:    getenv(v.profile),
		PolicyProfileVar: v.profile,
		StateHubAPIBase:  getenv(StateHubAPIBaseVar),
	}
	if f := getenv(v.config); f != "" {
		if out.ConfigFile, err = absolute(v.config, f); err != nil {
			return Paths{}, err
		}
		out.ConfigVar = v.config
	}
	if d := getenv(v.stateDir); d != "" {
		if out.StateDir, err = absolute(v.stateDir, d); err != nil {
			return Paths{}, err
		}
	}
	if s := getenv(v.socket); s != "" {
		if out.Socket, err = absolute(v.socket, s); err != nil {
			return Paths{}, err
		}
	}
	if s := getenv(programVars[Tamq].socket); s != "" {
		if out.TamqSocket, err = absolute(programVars[Tamq].socket, s); err != nil {
			return Paths{}, err
		}
	}
	if p == Tamq {
		out.TamqSocket = out.Socket
	}
	out.Database = filepath.Join(out.StateDir, databaseNames[p])
	out.LogFile = filepath.Join(out.StateDir, string(p)+".log")
	out.BackupDir = filepath.Join(out.StateDir, "backups")
	out.LockFile = filepath.Join(out.StateDir, string(p)+".lock")
	out.StartLockFile = filepath.Join(out.StateDir, "start.lock")
	out.OpenLockFile = filepath.Join(out.StateDir, "open.lock")
	out.OrwellLog = filepath.Join(out.StateDir, "orwell.log")
	return out, nil
}

// PrivateRuntimeDir is where both programs put their sockets when
// XDG_RUNTIME_DIR is unset: a directory of the user's own under $TMPDIR (else
// /tmp), named by uid like tmux's /tmp/tmux-<uid>. The spec's literal default,
// /tmp/<program>.sock, would let another user bind that path first and receive
// every message; a private directory cannot be entered by anyone else.
func PrivateRuntimeDir(getenv func(string) string) string {
	base := getenv("TMPDIR")
	if !filepath.IsAbs(base) {
		base = "/tmp"
	}
	return filepath.Join(filepath.Clean(base), fmt.Sprintf("tamq-%d", os.Getuid()))
}

// SocketVar is the variable that moves the program's socket.
func (p Paths) SocketVar() string { return programVars[p.Program].socket }

// SocketDirPrivate reports whether socket lies in the private runtime
// directory, which must then be checked before the socket is used.
func (p Paths) SocketDirPrivate(socket string) bool {
	return p.PrivateDir != "" && filepath.Dir(socket) == p.PrivateDir
}

// xdgDir follows the XDG base directory rule: a variable holding a relative path
// is invalid and ignored, and the fallback is under $HOME.
func xdgDir(getenv func(string) string, name, fallback string) (string, error) {
	if d := getenv(name); filepath.IsAbs(d) {
		return filepath.Clean(d), nil
	}
	home := getenv("HOME")
	if home == "" {
		return "", errs.New(errs.ConfigInvalid, "cannot locate the %s directory: neither %s nor HOME is set", fallback, name).
			WithHint("set HOME, or %s to an absolute path", name)
	}
	return filepath.Join(home, fallback), nil
}

func absolute(name, value string) (string, error) {
	abs, err := filepath.Abs(value)
	if err != nil {
		return "", errs.Wrap(errs.ConfigInvalid, err, "%s=%q", name, value)
	}
	return abs, nil
}

// EnsurePrivateDir creates dir (and missing parents) with mode 0700 when it does not
// exist. An existing directory is left as the user made it; a non-directory there is
// an error naming the path.
func EnsurePrivateDir(dir string) error {
	fi, err := os.Stat(dir)
	if err == nil {
		if !fi.IsDir() {
			return errs.New(errs.Storage, "state directory %s exists but is not a directory", dir)
		}
		return nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return errs.Wrap(errs.Storage, err, "cannot use state directory %s", dir)
	}
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return errs.Wrap(errs.Storage, unwrapPath(err), "cannot create state directory %s", dir)
	}
	// MkdirAll honours the umask; make the leaf exactly 0700 whatever it was.
	if err := os.Chmod(dir, 0o700); err != nil {
		return errs.Wrap(errs.Storage, unwrapPath(err), "cannot set mode of %s", dir)
	}
	return nil
}

// unwrapPath drops the *PathError wrapper so messages name the path only once.
func unwrapPath(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return fmt.Errorf("%s: %w", pe.Path, pe.Err)
	}
	return err
}
