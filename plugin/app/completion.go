package app

import (
	"github.com/spf13/cobra"

	"github.com/torus-mpi/torus/plugin/cmdutil"
)

const completionLong = `Print a shell completion script for kubectl-mpi: commands, flags and job names.

  # bash (add to ~/.bashrc)
  source <(kubectl mpi completion bash)
  # zsh (add to ~/.zshrc)
  source <(kubectl mpi completion zsh)
  # fish
  kubectl mpi completion fish > ~/.config/fish/completions/kubectl-mpi.fish

The script completes the kubectl-mpi command. For "kubectl mpi <TAB>" (and "oc mpi <TAB>"), kubectl 1.26
and later asks an executable named kubectl_complete-mpi on the PATH; make it:

  printf '#!/bin/sh\nkubectl mpi __complete "$@"\n' > ~/bin/kubectl_complete-mpi && chmod +x ~/bin/kubectl_complete-mpi`

func newCompletionCmd() *cobra.Command {
	return &cobra.Command{
		Use:       "completion bash|zsh|fish",
		Short:     "Print a shell completion script (job names included)",
		Long:      completionLong,
		ValidArgs: []string{"bash", "zsh", "fish"},
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) != 1 {
				return cmdutil.UsageError("completion takes a shell: bash, zsh or fish")
			}
			return nil
		},
		RunE: func(cmd *cobra.Command, args []string) error {
			root := cmd.Root()
			// The script completes the binary, which is named kubectl-mpi
			// on the PATH.
			use := root.Use
			root.Use = "kubectl-mpi"
			defer func() { root.Use = use }()
			out := cmd.OutOrStdout()
			switch args[0] {
			case "bash":
				return root.GenBashCompletionV2(out, true)
			case "zsh":
				return root.GenZshCompletion(out)
			case "fish":
				return root.GenFishCompletion(out, true)
			}
			return cmdutil.UsageError("completion %q: use bash, zsh or fish", args[0])
		},
	}
}
