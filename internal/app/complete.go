package app

import (
	"strings"

	"github.com/spf13/cobra"
)

// CompleteRepos completes registered gita repo slugs; use it as the
// ValidArgsFunction (or flag completion) wherever a repo is an argument.
func CompleteRepos(a *App) cobra.CompletionFunc {
	return func(cmd *cobra.Command, args []string, toComplete string) ([]cobra.Completion, cobra.ShellCompDirective) {
		reg, err := a.Registry()
		if err != nil {
			return nil, cobra.ShellCompDirectiveNoFileComp | cobra.ShellCompDirectiveError
		}
		var out []cobra.Completion
		for _, slug := range reg.Slugs() {
			if strings.HasPrefix(slug, toComplete) && !contains(args, slug) {
				out = append(out, slug)
			}
		}
		return out, cobra.ShellCompDirectiveNoFileComp
	}
}

func contains(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}
