// Package app holds what both programs' command lines share: the global flags,
// output conventions, error-to-exit-status handling, and the commands every
// program has (version, config, db-version, repos). Program-specific commands live
// in internal/tamq/cli and internal/engine/cli.
package app

import (
	"encoding/json"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/tmux-amq/tamq/internal/config"
	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/sqlitedb"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// App is what a command needs from its surroundings. Streams, environment and
// clock are injected so tests can run commands in-process.
type App struct {
	Program paths.Program
	// Short is the one-line description shown by --help.
	Short string
	// Migrations is the program's database schema, for db-version.
	Migrations []sqlitedb.Migration

	Getenv func(string) string
	Now    func() time.Time
	In     io.Reader
	Out    io.Writer
	Err    io.Writer

	// Global flags.
	JSON    bool
	Quiet   bool
	Verbose bool

	// paths is resolved on first use, under pathsMu: a service's requests
	// ask for it from their own goroutines.
	pathsMu sync.Mutex
	paths   *paths.Paths
	// registry is made on first use; the service reads the registry from
	// every request's goroutine.
	registryMu sync.Mutex
	registry   *gita.Reader
	// daemonLog is the running daemon's logger (Serve), nil otherwise.
	daemonLog atomic.Pointer[slog.Logger]
}

// NewApp returns an App wired to the process's real environment.
func NewApp(p paths.Program, short string, migrations []sqlitedb.Migration) *App {
	return &App{
		Program: p, Short: short, Migrations: migrations,
		Getenv: os.Getenv, Now: time.Now,
		In: os.Stdin, Out: os.Stdout, Err: os.Stderr,
	}
}

// Name is the program's command name.
func (a *App) Name() string { return string(a.Program) }

// Paths resolves (once) where the program keeps its files.
func (a *App) Paths() (paths.Paths, error) {
	a.pathsMu.Lock()
	defer a.pathsMu.Unlock()
	if a.paths == nil {
		p, err := paths.Resolve(a.Program, a.Getenv)
		if err != nil {
			return paths.Paths{}, err
		}
		a.paths = &p
	}
	return *a.paths, nil
}

// StartPaths resolves the paths and loads the config, as a start needs
// before it pings or starts anything: a config that does not load stops the
// start here with its own error, not the service at its first request.
func (a *App) StartPaths() (paths.Paths, error) {
	p, err := a.Paths()
	if err != nil {
		return p, err
	}
	_, err = a.Config()
	return p, err
}

// Config loads and validates the effective configuration.
func (a *App) Config() (*config.Loaded, error) {
	p, err := a.Paths()
	if err != nil {
		return nil, err
	}
	return config.Load(p)
}

// Registry reads the current gita registry; each call sees the file as it is now.
func (a *App) Registry() (*gita.Registry, error) {
	rd, err := a.registryReader()
	if err != nil {
		return nil, err
	}
	return rd.Load()
}

// WatchedRegistry is Registry for a daemon that reads it on every request:
// the registry files are re-read when they change, the registered paths
// checked again at most once a second (gita.Reader.Watched).
func (a *App) WatchedRegistry() (*gita.Registry, error) {
	rd, err := a.registryReader()
	if err != nil {
		return nil, err
	}
	return rd.Watched()
}

func (a *App) registryReader() (*gita.Reader, error) {
	a.registryMu.Lock()
	defer a.registryMu.Unlock()
	if a.registry == nil {
		dir, err := gita.Dir(a.Getenv)
		if err != nil {
			return nil, err
		}
		a.registry = gita.NewReader(dir)
	}
	return a.registry, nil
}

// Logger returns a slog logger on stderr honouring --quiet, --verbose and
// --json; while a daemon runs (Serve), the daemon's: on its log file when
// detached, its repeated warnings counted (openDaemonLog).
func (a *App) Logger() *slog.Logger {
	if l := a.daemonLog.Load(); l != nil {
		return l
	}
	return NewLogger(a.Err, a.JSON, a.Quiet, a.Verbose)
}

// NewLogger builds the logger both daemons use: info by default, errors only when
// quiet, debug when verbose, JSON records when asked for.
func NewLogger(w io.Writer, asJSON, quiet, verbose bool) *slog.Logger {
	level := slog.LevelInfo
	switch {
	case quiet:
		level = slog.LevelError
	case verbose:
		level = slog.LevelDebug
	}
	opts := &slog.HandlerOptions{Level: level}
	if asJSON {
		return slog.New(slog.NewJSONHandler(w, opts))
	}
	return slog.New(slog.NewTextHandler(w, opts))
}

// PrintJSON writes v to stdout as one indented JSON document. Its strings are
// not escaped for a terminal: encoding/json writes control characters below
// U+0020 (ESC, BEL, CR...) and U+2028/U+2029 as \u escapes, but C1 controls,
// DEL and bidirectional format characters are valid UTF-8 and go out as they
// are. That is right for JSON, whose reader is a program that gets the value
// back exactly; a program that shows a value to a person escapes it itself.
func (a *App) PrintJSON(v any) error {
	enc := json.NewEncoder(a.Out)
	enc.SetIndent("", "  ")
	enc.SetEscapeHTML(false)
	return enc.Encode(v)
}

// Report prints a report as JSON with --json, else as print writes it, and
// then returns problem: a report that says something is wrong is printed
// whole before its exit status says so.
func (a *App) Report(v any, print func(), problem error) error {
	if a.JSON {
		if err := a.PrintJSON(v); err != nil {
			return err
		}
	} else {
		print()
	}
	return problem
}

// Printf writes human output to stdout. Commands escape the names they print;
// escaping the whole text again is the second line of defence for a field one
// forgot (a no-op on text that cannot act).
func (a *App) Printf(format string, args ...any) {
	io.WriteString(a.Out, textsafe.EscapeText(fmt.Sprintf(format, args...)))
}

// Notef writes a diagnostic note to stderr unless --quiet, escaped as Printf.
func (a *App) Notef(format string, args ...any) {
	if !a.Quiet {
		io.WriteString(a.Err, a.Name()+": "+textsafe.EscapeText(fmt.Sprintf(format, args...))+"\n")
	}
}
