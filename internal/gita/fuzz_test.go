package gita

import (
	"slices"
	"strings"
	"testing"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// seeds are lines a hand-edited or gita-written registry may hold.
var seeds = []string{
	"/a,a,,\r\n\"/b c,d\",\"b c,d\",,\r\n",
	"/a,a\n/b,b,m,-c x\n\n",
	"\"/q\"\"uote\",\"q\"\"uote\",,\r\n",
	"\"unterminated\r\n/a,a,,\r\n",
	"/a,a,,,extra\r\n",
	"/a\r\n,b\r\n/c,\r\n",
	"/a,a,,\r\n/b,a,,\r\n",
	"a:b c:/p\r\nd:e\r\n\"x:y\":z:\"/p:q\"\r\n",
	"/a,b\"c\r\n\"/d\"e,f\r\n",
	"\r\r\n\n\"\n\",x\r",
}

func FuzzParseRepos(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add(readTestdata(f, "repos.csv"))
	f.Add(readTestdata(f, "repos-two-column.csv"))
	const file = "/x/gita/repos.csv"
	f.Fuzz(func(t *testing.T, data []byte) {
		rows, err := parseRepos(file, data)
		if err != nil {
			if !errs.Is(err, errs.RegistryError) || !strings.HasPrefix(err.Error(), file+":") {
				t.Fatalf("error %q (%s) should be a registry_error naming the file and line", err, errs.CodeOf(err))
			}
			if textsafe.ControlProblem(err.Error()) != "" {
				t.Fatalf("error %q holds what could act in a terminal", err)
			}
			return
		}
		seen := map[string]bool{}
		lastLine := 0
		for _, r := range rows {
			if r.repo.Name == "" || r.repo.Path == "" {
				t.Fatalf("accepted a row without a name or path: %+v", r)
			}
			if p := textsafe.NameProblem(r.repo.Name); p != "" {
				t.Fatalf("accepted name %q: %s", r.repo.Name, p)
			}
			if p := textsafe.ControlProblem(r.repo.Path); p != "" {
				t.Fatalf("accepted path %q: %s", r.repo.Path, p)
			}
			if seen[r.repo.Name] {
				t.Fatalf("accepted name %q twice", r.repo.Name)
			}
			seen[r.repo.Name] = true
			if r.line <= lastLine {
				t.Fatalf("line %d after line %d", r.line, lastLine)
			}
			lastLine = r.line
			if !slices.Equal(r.repo.Flags, strings.Fields(r.repo.RawFlags)) {
				t.Fatalf("flags %q do not match %q", r.repo.Flags, r.repo.RawFlags)
			}
		}
	})
}

func FuzzParseGroups(f *testing.F) {
	for _, s := range seeds {
		f.Add([]byte(s))
	}
	f.Add(readTestdata(f, "groups.csv"))
	f.Add(readTestdata(f, "groups-two-column.csv"))
	const file = "/x/gita/groups.csv"
	f.Fuzz(func(t *testing.T, data []byte) {
		groups, err := parseGroups(file, data)
		if err != nil {
			if !errs.Is(err, errs.RegistryError) || !strings.HasPrefix(err.Error(), file+":") {
				t.Fatalf("error %q (%s) should be a registry_error naming the file and line", err, errs.CodeOf(err))
			}
			if textsafe.ControlProblem(err.Error()) != "" {
				t.Fatalf("error %q holds what could act in a terminal", err)
			}
			return
		}
		seen := map[string]bool{}
		for _, g := range groups {
			if g.Name == "" || seen[g.Name] {
				t.Fatalf("accepted an empty or repeated group name %q", g.Name)
			}
			for _, name := range append([]string{g.Name}, g.Repos...) {
				if p := textsafe.NameProblem(name); p != "" {
					t.Fatalf("accepted name %q: %s", name, p)
				}
			}
			seen[g.Name] = true
		}
	})
}
