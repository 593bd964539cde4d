package config

import (
	"bytes"
	"errors"
	"fmt"
	"io/fs"
	"reflect"
	"regexp"
	"strings"
	"sync"

	"github.com/pelletier/go-toml/v2"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/paths"
	"github.com/tmux-amq/tamq/internal/policy"
	"github.com/tmux-amq/tamq/internal/trust"
)

// Loaded is a validated effective configuration and where it came from.
type Loaded struct {
	Config
	// File is the config file consulted; FileExists says whether it was there.
	File       string
	FileExists bool
	// Overrides lists values taken from the environment, as "key from VAR".
	Overrides []string
	// Reference is where the reference State Hub listens by default
	// (ReferenceStateHubAPIBase), for the hints of a State Hub that does
	// not answer.
	Reference string
	// Version is the effective config version recorded in receipts: a hash
	// of the keys the program reads.
	Version string

	profileRef    string
	apiBaseInFile bool
}

// APIBaseOrigin says where statehub.api_base came from, in words that
// follow the address: the environment, the file, or the default.
func (l *Loaded) APIBaseOrigin() string {
	for _, o := range l.Overrides {
		if key, variable, _ := strings.Cut(o, " from "); key == "statehub.api_base" {
			return "from " + variable
		}
	}
	if l.apiBaseInFile {
		return "statehub.api_base in " + l.File
	}
	if l.StateHub.Kind == KindGitHub {
		return "GitHub's, the default of kind github"
	}
	return "the default: statehub.api_base is not set"
}

// Defaults is the configuration with every default and no file, for
// reports that go on when the file is invalid.
func Defaults(p paths.Paths) *Loaded {
	l := &Loaded{Config: Default(), File: p.ConfigFile, Reference: ReferenceStateHubAPIBase(p)}
	l.StateHub.APIBase = DefaultStateHubAPIBase
	l.Version = l.Config.Version(p.Program)
	l.profileRef = l.Config.ProfileRef()
	return l
}

// ProfileRef is Config.ProfileRef computed once: it is recorded with every
// message, and hashing the profile each time is wasted work.
func (l *Loaded) ProfileRef() string {
	if l.profileRef == "" {
		l.profileRef = l.Config.ProfileRef()
	}
	return l.profileRef
}

// Load reads the program's config file (a missing default file means defaults),
// applies environment overrides and validates the result.
func Load(p paths.Paths) (*Loaded, error) {
	// The file names the command run for State Hub's token (as the user):
	// one another user could write is refused before a byte of it is used.
	data, err := trust.ReadFile(p.ConfigFile, "config file")
	exists := true
	switch {
	case errs.Is(err, errs.PermissionDeny):
		return nil, err
	case errors.Is(err, fs.ErrNotExist) && p.ConfigVar == "":
		data, exists = nil, false
	case errors.Is(err, fs.ErrNotExist):
		return nil, errs.New(errs.ConfigInvalid, "config file %s (from %s) does not exist", p.ConfigFile, p.ConfigVar).
			WithHint("create it, or unset %s to use %s's defaults", p.ConfigVar, p.Program)
	case err != nil:
		return nil, errs.New(errs.ConfigInvalid, "cannot read config file %s: %v", p.ConfigFile, pathErrCause(err))
	}
	return load(p, data, exists)
}

// load is Load after the file is read: the bytes are parsed, the
// environment applied and the result validated. Apart so the fuzz target
// runs what Load runs on a file's bytes, without a file.
func load(p paths.Paths, data []byte, exists bool) (*Loaded, error) {
	cfg, err := Parse(p.Program, p.ConfigFile, data)
	if err != nil {
		return nil, err
	}
	l := &Loaded{Config: cfg, File: p.ConfigFile, FileExists: exists, Reference: ReferenceStateHubAPIBase(p)}
	if l.StateHub.Kind == "" {
		l.StateHub.Kind = KindContract
	}
	l.apiBaseInFile = l.StateHub.APIBase != ""
	if l.StateHub.APIBase == "" {
		l.StateHub.APIBase = DefaultStateHubAPIBase
		if l.StateHub.Kind == KindGitHub {
			l.StateHub.APIBase = DefaultGitHubAPIBase
		}
	}
	if l.StateHub.Kind == KindGitHub && p.Program == paths.Engine {
		l.StateHub.GitHub.fillDefaults()
	}
	if l.StateHub.Kind == KindBeads && p.Program == paths.Engine {
		l.StateHub.Beads.fillDefaults()
	}
	if p.StateHubAPIBase != "" {
		l.StateHub.APIBase = p.StateHubAPIBase
		l.Overrides = append(l.Overrides, "statehub.api_base from "+paths.StateHubAPIBaseVar)
	}
	if p.PolicyProfile != "" {
		l.Policy.Profile = p.PolicyProfile
		l.Overrides = append(l.Overrides, "policy.profile from "+p.PolicyProfileVar)
	}
	l.Cluster.fillDefaults(osHostname)
	if err := l.Validate(); err != nil {
		msg, variable := l.describe(err)
		e := errs.New(errs.ConfigInvalid, "%s", msg)
		if variable != "" {
			// The file may not even exist: the fix is the variable's, and
			// doctor's fix and the CLI's hint must say so.
			e = e.WithHint("fix or unset the environment variable %s (it overrides the config file %s)", variable, l.File)
		}
		return nil, e
	}
	l.Version = l.Config.Version(p.Program)
	l.profileRef = l.Config.ProfileRef()
	return l, nil
}

// describe names where a bad value came from: the environment (variable is
// then its name) or the file.
func (l *Loaded) describe(err error) (msg, variable string) {
	var fe *fieldError
	if errors.As(err, &fe) {
		for _, o := range l.Overrides {
			if key, variable, _ := strings.Cut(o, " from "); key == fe.key {
				return fmt.Sprintf("%s: %s", variable, fe.problem), variable
			}
		}
	}
	return fmt.Sprintf("config %s: %v", l.File, err), ""
}

func pathErrCause(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// Parse decodes program p's TOML over the defaults without validating. A
// [policy.profiles.X] table replaces the built-in profile of the same name
// whole, so what a profile allows is always visible in one place.
func Parse(p paths.Program, file string, data []byte) (Config, error) {
	cfg := Default()
	cfg.Policy.Profiles = nil
	err := decodeStrict(data, cfg.View(p))
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		// Keys p does not read are misspelt or the other program's. Decoding
		// against every key of both tells which: what fails there (a
		// misspelling, or a wrong type) is reported as it always was, and
		// what does not is the other program's. Each program has its own
		// file, so such a key is in the wrong one.
		all := Default()
		if err = decodeStrict(data, &all); err == nil {
			return Config{}, errs.New(errs.ConfigInvalid, "config %s: %s", file, othersKeys(p, strict))
		}
	}
	if err != nil {
		return Config{}, errs.New(errs.ConfigInvalid, "%s", decodeMessage(file, err, keyTypes(cfg.View(p))))
	}
	if _, ok := cfg.Policy.Profiles[policy.DefaultName]; !ok {
		if cfg.Policy.Profiles == nil {
			cfg.Policy.Profiles = map[string]policy.Profile{}
		}
		cfg.Policy.Profiles[policy.DefaultName] = policy.Default()
	}
	return cfg, nil
}

func decodeStrict(data []byte, v any) error {
	dec := toml.NewDecoder(bytes.NewReader(data))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

// missingKeys names the keys a strict decode did not know, with their lines
// and, when known is given, the keys each may have meant.
func missingKeys(strict *toml.StrictMissingError, known map[string]reflect.Type) string {
	keys := make([]string, 0, len(strict.Errors))
	for _, e := range strict.Errors {
		row, _ := e.Position()
		key := strings.Join(e.Key(), ".")
		if near := nearKeys(key, known); len(near) > 0 {
			keys = append(keys, fmt.Sprintf("'%s' (line %d; did you mean %s?)", key, row, quotedOr(near)))
			continue
		}
		keys = append(keys, fmt.Sprintf("'%s' (line %d)", key, row))
	}
	return strings.Join(keys, ", ")
}

func quotedOr(names []string) string {
	q := make([]string, len(names))
	for i, n := range names {
		q[i] = "'" + n + "'"
	}
	if len(q) == 1 {
		return q[0]
	}
	return strings.Join(q[:len(q)-1], ", ") + " or " + q[len(q)-1]
}

// othersKeys says that the keys strict lists belong to the program other than p.
func othersKeys(p paths.Program, strict *toml.StrictMissingError) string {
	if len(strict.Errors) == 1 {
		return fmt.Sprintf("key %s is %s's; %s does not use it", missingKeys(strict, nil), other(p), p)
	}
	return fmt.Sprintf("keys %s are %s's; %s does not use them", missingKeys(strict, nil), other(p), p)
}

// decodeMessage says what is wrong with the file in its own terms: the file,
// line and key, and for a value of the wrong kind what the key takes ("must
// be a whole number, not a string"), never the Go type it decodes into.
// known maps the program's keys to their types (keyTypes).
func decodeMessage(file string, err error, known map[string]reflect.Type) string {
	var strict *toml.StrictMissingError
	if errors.As(err, &strict) {
		noun := "key"
		if len(strict.Errors) > 1 {
			noun = "keys"
		}
		return fmt.Sprintf("config %s: unknown %s %s", file, noun, missingKeys(strict, known))
	}
	var de *toml.DecodeError
	if errors.As(err, &de) {
		row, col := de.Position()
		key := strings.Join(de.Key(), ".")
		msg := strings.TrimPrefix(de.Error(), "toml: ")
		if m := typeMismatch().FindStringSubmatch(msg); m != nil {
			msg = mismatchMessage(typeOf(known, key), m[1], m[2])
		} else {
			msg = goTypeDetail().ReplaceAllString(msg, "a value of type $1")
		}
		if key != "" {
			msg = key + ": " + msg
		}
		return fmt.Sprintf("config %s: line %d, column %d: %s", file, row, col, msg)
	}
	// Type mismatches come as plain errors; strip the library's prefix.
	return fmt.Sprintf("config %s: %s", file, strings.TrimPrefix(err.Error(), "toml: "))
}

// mismatchMessage says what key of type want takes when the file gave a
// TOML value of kind got; goType is the type the library could not fill,
// which is a list's item type when an item is wrong.
func mismatchMessage(want reflect.Type, got, goType string) string {
	if want == nil {
		return "must not be " + article(got)
	}
	if (want.Kind() == reflect.Slice || want.Kind() == reflect.Array) && !strings.HasPrefix(goType, "[]") {
		return fmt.Sprintf("must be %s; an item is %s", valueKind(want), article(got))
	}
	return fmt.Sprintf("must be %s, not %s", valueKind(want), article(got))
}

// typeMismatch matches the library's "cannot decode TOML string into struct
// field X of type int": the TOML kind given and the Go type wanted. X may
// hold spaces (an anonymous struct), so it is matched loosely.
var typeMismatch = sync.OnceValue(func() *regexp.Regexp {
	return regexp.MustCompile(`^cannot decode TOML ([a-z ]+?) into (?:struct field .+ of type |a value of type )?(\S+)$`)
})

// goTypeDetail matches the Go struct field the TOML library names in type errors,
// which means nothing to someone editing the file.
// It is compiled on first use, since it is needed only for a broken file.
var goTypeDetail = sync.OnceValue(func() *regexp.Regexp { return regexp.MustCompile(`struct field .+ of type (\S+)`) })
