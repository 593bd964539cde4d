package gita

import (
	"bytes"
	"encoding/csv"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/dustin/go-humanize/english"

	"github.com/tmux-amq/tamq/internal/errs"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

// parseRepos reads repos.csv as gita does (csv.DictReader with the field names
// path,name,type,flags and "" for missing ones), but refuses what gita would
// misread silently: a row without a path or name, extra fields, a name used
// twice (gita would keep only the last) and broken quoting. It also refuses
// what gita takes but tamq must not: a name that could act in a terminal (a
// name is typed into agents' terminals as a sender and printed by every
// command) and a path with a control character, which no repository tamq
// opens a window in has.
func parseRepos(file string, data []byte) ([]row, error) {
	var rows []row
	firstLine := map[string]int{}
	err := readCSV(file, data, ',', func(rec []string, line int) error {
		if len(rec) < 2 || len(rec) > 4 {
			return lineError(file, line, "row has %d %s, want path,name[,type,flags]", len(rec), english.PluralWord(len(rec), "field", ""))
		}
		rec = append(rec, "", "")[:4]
		repo := Repo{Path: rec[0], Name: rec[1], Type: rec[2], RawFlags: rec[3], Flags: strings.Fields(rec[3])}
		switch {
		case repo.Path == "":
			return lineError(file, line, "empty path")
		case repo.Name == "":
			return lineError(file, line, "empty name")
		}
		if p := textsafe.NameProblem(repo.Name); p != "" {
			return lineError(file, line, "name '%s' cannot be used: %s", textsafe.Escape(repo.Name), p)
		}
		if p := textsafe.ControlProblem(repo.Path); p != "" {
			return lineError(file, line, "path '%s' cannot be used: %s", textsafe.Escape(repo.Path), p)
		}
		if first, dup := firstLine[repo.Name]; dup {
			return lineError(file, line, "duplicate name '%s' (first on line %d)", repo.Name, first)
		}
		firstLine[repo.Name] = line
		rows = append(rows, row{repo: repo, line: line})
		return nil
	})
	return rows, err
}

// parseGroups reads groups.csv, whose rows are name:repos[:path] with the repo
// names space separated; older gita wrote no path. Group and repo names follow
// the rule of repos.csv (see parseRepos).
func parseGroups(file string, data []byte) ([]Group, error) {
	var groups []Group
	firstLine := map[string]int{}
	err := readCSV(file, data, ':', func(rec []string, line int) error {
		if len(rec) > 3 {
			return lineError(file, line, "row has %d fields, want name:repos[:path]", len(rec))
		}
		rec = append(rec, "", "")[:3]
		g := Group{Name: rec[0], Repos: strings.Fields(rec[1]), Path: rec[2]}
		if g.Name == "" {
			return lineError(file, line, "empty group name")
		}
		if p := textsafe.NameProblem(g.Name); p != "" {
			return lineError(file, line, "group name '%s' cannot be used: %s", textsafe.Escape(g.Name), p)
		}
		for _, name := range g.Repos {
			if p := textsafe.NameProblem(name); p != "" {
				return lineError(file, line, "repo name '%s' in group '%s' cannot be used: %s", textsafe.Escape(name), g.Name, p)
			}
		}
		if p := textsafe.ControlProblem(g.Path); p != "" {
			return lineError(file, line, "group path '%s' cannot be used: %s", textsafe.Escape(g.Path), p)
		}
		if first, dup := firstLine[g.Name]; dup {
			return lineError(file, line, "duplicate group '%s' (first on line %d)", g.Name, first)
		}
		firstLine[g.Name] = line
		groups = append(groups, g)
		return nil
	})
	return groups, err
}

// readCSV calls fn for each record with the line it starts on. Like Python's
// csv module it skips blank lines and takes CRLF or LF line ends.
func readCSV(file string, data []byte, comma rune, fn func(rec []string, line int) error) error {
	r := csv.NewReader(bytes.NewReader(data))
	r.Comma = comma
	r.FieldsPerRecord = -1
	for {
		rec, err := r.Read()
		if err == io.EOF {
			return nil
		}
		if err != nil {
			var pe *csv.ParseError
			if !errors.As(err, &pe) {
				return errs.Wrap(errs.RegistryError, err, "cannot read gita registry %s", file)
			}
			switch {
			case errors.Is(pe.Err, csv.ErrQuote):
				// Reported where the quoted field began: that is the line to fix,
				// even if the parser only noticed lines later.
				return lineError(file, pe.StartLine, `quoted field not closed, or text after its closing "`)
			case errors.Is(pe.Err, csv.ErrBareQuote):
				return lineError(file, pe.Line, `" inside an unquoted field (quote the field and double the ")`)
			default:
				return lineError(file, pe.Line, "%v", pe.Err)
			}
		}
		line, _ := r.FieldPos(0)
		if err := fn(rec, line); err != nil {
			return err
		}
	}
}

func lineError(file string, line int, format string, args ...any) *errs.Error {
	return errs.New(errs.RegistryError, "%s:%d: %s", file, line, fmt.Sprintf(format, args...)).
		WithHint("fix or delete line %d of %s (see `gita ls`)", line, file)
}
