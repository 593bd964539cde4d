// Package gita reads the repository registry of gita 0.16
// (https://github.com/nosarthur/gita), which is tamq's list of repositories: a
// repo slug is a gita repo name. The registry is read exactly as gita reads it and
// never written: gita owns it, tamq never registers, renames or clones anything.
package gita

import (
	"fmt"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"

	"github.com/tmux-amq/tamq/internal/errs"
)

// The files gita keeps in its directory.
const (
	ReposFileName  = "repos.csv"
	GroupsFileName = "groups.csv"
)

const registerHint = "register repositories with `gita add <path>` (see `gita ls`)"

// Repo is one row of repos.csv.
type Repo struct {
	Name string
	Path string
	// Type is gita's unused third column, kept because gita keeps it.
	Type string
	// RawFlags is the fourth column: git options gita passes to every git
	// command it runs in this repo, space separated.
	RawFlags string
	Flags    []string
	// Bare is set when Path is a bare repository (gita registers those too).
	Bare bool
}

// Group is one row of groups.csv.
type Group struct {
	Name  string
	Repos []string
	// Path is the directory the group was made from ("" in older files).
	Path string
}

// Unregistered is a row of repos.csv that gita does not list, because its path
// is not a git repository (any more). It is kept so status can say why a repo
// has gone.
type Unregistered struct {
	Repo   Repo
	Line   int
	Reason string
}

// Registry is one reading of the registry. It is never changed after Load
// returns it, so callers may keep it and share it.
type Registry struct {
	Dir, ReposFile, GroupsFile string

	Repos        []Repo // registered repos, in file order
	Groups       []Group
	Unregistered []Unregistered
}

// Dir returns the directory gita keeps its registry in, the way gita 0.16
// (gita/common.py get_config_dir) finds it: an empty variable counts as unset.
func Dir(getenv func(string) string) (string, error) {
	if root := getenv("GITA_PROJECT_HOME"); root != "" {
		return filepath.Join(root, "gita"), nil
	}
	if root := getenv("XDG_CONFIG_HOME"); root != "" {
		return filepath.Join(root, "gita"), nil
	}
	if home := getenv("HOME"); home != "" {
		return filepath.Join(home, ".config", "gita"), nil
	}
	return "", errs.New(errs.RegistryError,
		"cannot locate the gita registry: GITA_PROJECT_HOME, XDG_CONFIG_HOME and HOME are all unset or empty").
		WithHint("set HOME (gita reads $HOME/.config/gita), or GITA_PROJECT_HOME to the directory that holds gita/")
}

// Lookup finds a registered repo by its exact name.
func (r *Registry) Lookup(slug string) (Repo, bool) {
	for _, repo := range r.Repos {
		if repo.Name == slug {
			return repo, true
		}
	}
	return Repo{}, false
}

// Slugs returns the names of the registered repos, sorted.
func (r *Registry) Slugs() []string {
	out := make([]string, 0, len(r.Repos))
	for _, repo := range r.Repos {
		out = append(out, repo.Name)
	}
	slices.Sort(out)
	return out
}

// Near returns up to max registered names that look like slug, best first: a
// different case, then names slug begins, then names that contain slug (or
// that slug contains), then names a few typing mistakes away.
func (r *Registry) Near(slug string, max int) []string {
	if max <= 0 || slug == "" {
		return nil
	}
	type candidate struct {
		name       string
		tier, dist int
	}
	want := strings.ToLower(slug)
	wantLen := utf8.RuneCountInString(want)
	// Short slugs are a typo away from almost any short name; allow fewer edits.
	maxDist := min(1+wantLen/4, 3)
	var found []candidate
	for _, repo := range r.Repos {
		name := strings.ToLower(repo.Name)
		dist := EditDistance(want, name)
		var tier int
		switch {
		case name == want:
			tier = 0
		case want != "" && strings.HasPrefix(name, want):
			tier = 1
		case wantLen >= 2 && strings.Contains(name, want),
			utf8.RuneCountInString(name) >= 3 && strings.Contains(want, name):
			tier = 2
		case dist <= maxDist:
			tier = 3
		default:
			continue
		}
		found = append(found, candidate{repo.Name, tier, dist})
	}
	slices.SortFunc(found, func(a, b candidate) int {
		if a.tier != b.tier {
			return a.tier - b.tier
		}
		if a.dist != b.dist {
			return a.dist - b.dist
		}
		return strings.Compare(a.name, b.name)
	})
	out := make([]string, 0, min(max, len(found)))
	for _, c := range found[:min(max, len(found))] {
		out = append(out, c.name)
	}
	return out
}

// Resolve finds a registered repo or says, in terms a user can act on, why
// there is none.
func (r *Registry) Resolve(slug string) (Repo, error) {
	if repo, ok := r.Lookup(slug); ok {
		return repo, nil
	}
	for _, u := range r.Unregistered {
		if u.Repo.Name == slug {
			return Repo{}, errs.New(errs.UnknownTarget,
				"unknown target '%s': its gita registry entry points to %s, which is not a git repository (%s)",
				slug, u.Repo.Path, u.Reason).
				WithHint("`gita ls` does not list it either; restore the repository at %s, or %s",
					u.Repo.Path, r.RemoveRowsHint([]Unregistered{u}))
		}
	}
	msg := fmt.Sprintf("unknown target '%s': not in the gita registry (see `gita ls`)", slug)
	if near := r.Near(slug, 3); len(near) > 0 {
		msg += "; did you mean " + orList(near) + "?"
	}
	return Repo{}, errs.New(errs.UnknownTarget, "%s", msg).WithHint("%s", registerHint)
}

// RemoveRowsHint says how to drop rows gita does not list: "remove line 3 of
// FILE" or "remove lines 2 and 5 of FILE". `gita rm` cannot drop them (gita
// hides a row whose path is gone or not a git repository, so it answers that
// the repo does not exist); deleting the line of repos.csv is what works. Both
// `tamq open` and doctor give this one hint.
func (r *Registry) RemoveRowsHint(us []Unregistered) string {
	lines := make([]string, len(us))
	for i, u := range us {
		lines[i] = strconv.Itoa(u.Line)
	}
	if len(lines) == 1 {
		return fmt.Sprintf("remove line %s of %s", lines[0], r.ReposFile)
	}
	return fmt.Sprintf("remove lines %s and %s of %s",
		strings.Join(lines[:len(lines)-1], ", "), lines[len(lines)-1], r.ReposFile)
}

func orList(names []string) string {
	quoted := make([]string, len(names))
	for i, n := range names {
		quoted[i] = "'" + n + "'"
	}
	if len(quoted) == 1 {
		return quoted[0]
	}
	return strings.Join(quoted[:len(quoted)-1], ", ") + " or " + quoted[len(quoted)-1]
}

// EditDistance is the optimal string alignment distance over runes: Levenshtein
// plus swapping two neighbours, the commonest typo. The config's did-you-mean
// for keys uses it too, so both kinds of name forgive the same typos.
func EditDistance(a, b string) int {
	s, t := []rune(a), []rune(b)
	prev2 := make([]int, len(t)+1)
	prev := make([]int, len(t)+1)
	cur := make([]int, len(t)+1)
	for j := range prev {
		prev[j] = j
	}
	for i := 1; i <= len(s); i++ {
		cur[0] = i
		for j := 1; j <= len(t); j++ {
			cost := 1
			if s[i-1] == t[j-1] {
				cost = 0
			}
			cur[j] = min(prev[j]+1, cur[j-1]+1, prev[j-1]+cost)
			if i > 1 && j > 1 && s[i-1] == t[j-2] && s[i-2] == t[j-1] {
				cur[j] = min(cur[j], prev2[j-2]+1)
			}
		}
		prev2, prev, cur = prev, cur, prev2
	}
	return prev[len(t)]
}
