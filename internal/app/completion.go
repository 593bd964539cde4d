package app

import (
	"fmt"
	"slices"

	"github.com/spf13/cobra"
)

// explainBashCompletion replaces the help of `completion bash` that cobra
// builds: the script it prints calls bash-completion's functions, and
// without that package every Tab prints "_get_comp_words_by_ref: command
// not found" (issue 40), which cobra's one line about the package does not
// connect to. The directory it names is bash-completion's own for a user,
// so no root is needed. Cobra builds the command only when the tree has
// it (not on tamq's fast path), so this builds it first, as Execute would, and only
// when the command line names it.
func explainBashCompletion(root *cobra.Command, args []string) {
	// Only a line naming the command needs it; others skip building it.
	if root.CompletionOptions.DisableDefaultCmd || !slices.Contains(args, "completion") {
		return
	}
	root.InitDefaultCompletionCmd(args...)
	cmd, _, err := root.Find([]string{"completion", "bash"})
	if err != nil || cmd.Name() != "bash" {
		return
	}
	name := root.Name()
	cmd.Long = fmt.Sprintf(`Print the bash completion script for %[1]s: its commands, flags and arguments.

The script needs the bash-completion package: bash alone lacks the functions it
calls, and without them every Tab prints "_get_comp_words_by_ref: command not
found". Install it with your package manager, e.g. sudo apt-get install
bash-completion (Debian, Ubuntu), sudo dnf install bash-completion (Fedora) or
brew install bash-completion@2 (macOS), and open a new shell.

To load completions in the current shell:

	source <(%[1]s completion bash)

To load them in every new shell (bash-completion's directory for your own):

	mkdir -p ~/.local/share/bash-completion/completions
	%[1]s completion bash > ~/.local/share/bash-completion/completions/%[1]s
`, name)
}
