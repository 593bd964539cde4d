package app

import (
	"text/tabwriter"

	"github.com/spf13/cobra"

	"github.com/tmux-amq/tamq/internal/gita"
	"github.com/tmux-amq/tamq/internal/textsafe"
)

type repoRecord struct {
	Name   string   `json:"name"`
	Path   string   `json:"path"`
	Type   string   `json:"type,omitempty"`
	Flags  []string `json:"flags"`
	Groups []string `json:"groups"`
}

type unregisteredRecord struct {
	Name   string `json:"name"`
	Path   string `json:"path"`
	Line   int    `json:"line"`
	Reason string `json:"reason"`
}

type reposRecord struct {
	Registry     string               `json:"registry"`
	Repos        []repoRecord         `json:"repos"`
	Unregistered []unregisteredRecord `json:"unregistered"`
}

func newReposCmd(a *App) *cobra.Command {
	var all bool
	cmd := &cobra.Command{
		Use:   "repos [REPO...]",
		Short: "List the gita-registered repositories that can be addressed",
		Long: `List the repositories registered in gita (the only ones that can be addressed),
with their paths and groups. Like 'gita ls', a registry row whose path is not a
git repository is not registered; --all lists those rows too, with the reason.
Given REPO arguments, list just those, failing on any that is not registered.
The registry is read, never written.`,
		ValidArgsFunction: CompleteRepos(a),
		RunE: func(cmd *cobra.Command, args []string) error {
			reg, err := a.Registry()
			if err != nil {
				return err
			}
			rec := reposRecord{Registry: reg.ReposFile, Repos: []repoRecord{}, Unregistered: []unregisteredRecord{}}
			selected := reg.Repos
			if len(args) > 0 {
				selected = nil
				for _, slug := range args {
					r, err := reg.Resolve(slug)
					if err != nil {
						return err
					}
					selected = append(selected, r)
				}
			}
			for _, r := range selected {
				rec.Repos = append(rec.Repos, repoRecord{Name: r.Name, Path: r.Path, Type: r.Type, Flags: orEmpty(r.Flags), Groups: groupsOf(reg, r.Name)})
			}
			if all && len(args) == 0 {
				for _, u := range reg.Unregistered {
					rec.Unregistered = append(rec.Unregistered, unregisteredRecord{Name: u.Repo.Name, Path: u.Repo.Path, Line: u.Line, Reason: u.Reason})
				}
			}
			if a.JSON {
				return a.PrintJSON(rec)
			}
			// The registry refuses names and paths that could act in a
			// terminal; they are escaped here all the same, as everywhere a
			// person reads them.
			tw := tabwriter.NewWriter(a.Out, 0, 4, 2, ' ', 0)
			for _, r := range rec.Repos {
				tw.Write([]byte(textsafe.Escape(r.Name) + "\t" + textsafe.Escape(r.Path) + "\n"))
			}
			for _, u := range rec.Unregistered {
				tw.Write([]byte(textsafe.Escape(u.Name) + "\t" + textsafe.Escape(u.Path) + "\t(not registered: " + textsafe.Escape(u.Reason) + ")\n"))
			}
			if err := tw.Flush(); err != nil {
				return err
			}
			if len(args) == 0 && !all && len(reg.Unregistered) > 0 {
				a.Notef("%d row(s) of %s are not git repositories; see --all", len(reg.Unregistered), reg.ReposFile)
			}
			return nil
		},
	}
	cmd.Flags().BoolVar(&all, "all", false, "also list registry rows that are not git repositories")
	return cmd
}

func groupsOf(reg *gita.Registry, name string) []string {
	out := []string{}
	for _, g := range reg.Groups {
		if contains(g.Repos, name) {
			out = append(out, g.Name)
		}
	}
	return out
}

func orEmpty(s []string) []string {
	if s == nil {
		return []string{}
	}
	return s
}
