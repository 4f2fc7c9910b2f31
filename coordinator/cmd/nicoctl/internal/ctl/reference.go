package ctl

import (
	"bytes"
	"fmt"
	"io"

	"github.com/spf13/cobra"
)

// WriteReference writes nicoctl's command-line reference (docs/cli.md):
// every command's help text, in the order `nicoctl --help` lists them.
// `make cli-docs` regenerates the file; a test fails when it drifts.
func WriteReference(w io.Writer) error {
	root := (&app{}).rootCmd()
	root.InitDefaultHelpCmd()
	root.InitDefaultCompletionCmd()
	fmt.Fprint(w, "# nicoctl command reference\n\n")
	fmt.Fprint(w, "Generated from nicoctl's help texts by `make cli-docs`; do not edit.\n")
	return writeCommand(w, root)
}

// writeCommand writes cmd's section and its subcommands'.
func writeCommand(w io.Writer, cmd *cobra.Command) error {
	if !cmd.IsAvailableCommand() && cmd.HasParent() {
		return nil
	}
	var help bytes.Buffer
	cmd.SetOut(&help)
	if err := cmd.Help(); err != nil {
		return fmt.Errorf("help of %s: %w", cmd.CommandPath(), err)
	}
	fmt.Fprintf(w, "\n## %s\n\n```\n%s```\n", cmd.CommandPath(), help.String())
	for _, c := range cmd.Commands() {
		if err := writeCommand(w, c); err != nil {
			return err
		}
	}
	return nil
}
