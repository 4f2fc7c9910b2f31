// Package ctl is nicoctl, the operator's command line: it reads the fleet's
// state from etcd (members, nodes, operations, a status summary) and files
// requests for the coordinator's leader (node removal), waiting for its
// answer. It decides nothing itself; its local checks only refuse early.
package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"
	"time"

	"github.com/homystack/nico/pkg/config"
	"github.com/spf13/cobra"
)

// Exit codes of nicoctl.
const (
	ExitOK       = 0 // the command did what was asked
	ExitFailed   = 1 // the command or the operation it asked for failed
	ExitUsage    = 2 // cannot reach the cluster, or bad usage or config
	ExitRefused  = 3 // refused as unsafe (locally or by the leader)
	ExitNotFound = 4 // no such node or operation
)

// exitError carries the exit code an error ends nicoctl with.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string { return e.err.Error() }
func (e *exitError) Unwrap() error { return e.err }

// withCode marks err to end nicoctl with code.
func withCode(code int, err error) error {
	if err == nil {
		return nil
	}
	return &exitError{code: code, err: err}
}

// exitCode is the code err ends nicoctl with: its own, or ExitUsage for the
// errors cobra returns before a command runs (flags, arguments).
func exitCode(err error) int {
	if err == nil {
		return ExitOK
	}
	var e *exitError
	if errors.As(err, &e) {
		return e.code
	}
	return ExitUsage
}

// settings are nicoctl's connection and output settings.
type settings = config.Ctl

// loadConfig reads the settings from cmd's flags, the NICO_* environment
// and the config file.
func loadConfig(cmd *cobra.Command) (settings, error) { return config.LoadCtl(cmd.Flags()) }

// app is one invocation of nicoctl.
type app struct {
	stdout, stderr io.Writer
	now            func() time.Time
	cfg            settings
}

const longHelp = `nicoctl reads and changes a nico fleet through its etcd cluster.

It reads members, nodes and operations, and files requests (such as the removal
of a node) for the coordinator's leader, waiting for its answer. Settings come
from flags, then NICO_* environment variables (NICO_ENDPOINTS, NICO_CONFIG,
NICO_TIMEOUT, NICO_DIALTIMEOUT, NICO_OUTPUT, NICO_STORE_PREFIX, NICO_TLS_CAFILE,
NICO_TLS_CERTFILE, NICO_TLS_KEYFILE), then the config file (YAML, with the
flags' names as keys: endpoints, timeout, dialTimeout, output, store.prefix,
tls.caFile...). Certificate and key paths (tls.*, secrets.keyFile) may be
relative to the working directory.
An endpoint that refuses fails at once; one that never answers fails after
--dialTimeout (connecting, TLS included), before --timeout bounds the answer. Shell completion: nicoctl completion
bash|zsh|fish (see nicoctl completion --help); reference: docs/cli.md.

Exit codes:
  0  ok
  1  failed (the command, or the operation it asked for)
  2  cannot reach the cluster, or bad usage or config
  3  refused as unsafe (by nicoctl's own check or by the leader)
  4  not found (no such node or operation)`

// Main runs nicoctl with args (without the program name) and returns its
// exit code.
func Main(args []string, stdout, stderr io.Writer) int {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	return mainContext(ctx, args, stdout, stderr)
}

// mainContext is Main under ctx: nicoctl's commands end when it does.
func mainContext(ctx context.Context, args []string, stdout, stderr io.Writer) int {
	a := &app{stdout: stdout, stderr: stderr, now: time.Now}
	root := a.rootCmd()
	root.SetArgs(args)
	root.SetOut(stdout)
	root.SetErr(stderr)
	cmd, err := root.ExecuteContextC(ctx)
	if err != nil {
		fmt.Fprintf(stderr, "nicoctl: %v\n", err)
		if exitCode(err) == ExitUsage && isUsage(err) {
			// The help of the command that refused, not always the root's.
			fmt.Fprintf(stderr, "Run '%s --help' for usage.\n", cmd.CommandPath())
		}
	}
	return exitCode(err)
}

// isUsage tells whether err came from cobra rather than from a command.
func isUsage(err error) bool {
	var e *exitError
	return !errors.As(err, &e)
}

func (a *app) rootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:           "nicoctl",
		Short:         "Operate a nico fleet and its etcd cluster",
		Long:          longHelp,
		SilenceErrors: true,
		SilenceUsage:  true,
		PersistentPreRunE: func(cmd *cobra.Command, _ []string) error {
			cfg, err := loadConfig(cmd)
			if err != nil {
				return withCode(ExitUsage, err)
			}
			a.cfg = cfg
			return nil
		},
	}
	config.CtlFlags(root.PersistentFlags())
	root.AddCommand(a.getCmd(), a.removeCmd(), a.statusCmd())
	root.AddCommand(a.rolloutCmd())
	root.AddCommand(a.eventsCmd())
	root.AddCommand(a.poolCmd())
	root.AddCommand(a.gossipCmd())
	root.AddCommand(a.tokenCmd())
	root.AddCommand(a.caCmd())
	root.AddCommand(a.applyCmd(), a.describeCmd())
	root.AddCommand(a.deleteCmd())
	root.AddCommand(a.snapshotCmd())
	root.AddCommand(a.restoreCmd(), a.recoverCmd())
	return root
}

// group is a command that only holds subcommands; run bare, it is a usage
// error naming them.
func group(use, short, what string, subs ...*cobra.Command) *cobra.Command {
	c := &cobra.Command{
		Use:   use,
		Short: short,
		Args: func(cmd *cobra.Command, args []string) error {
			if len(args) == 0 {
				return nil
			}
			return withCode(ExitUsage, fmt.Errorf("unknown command %q for %q; it accepts %s (see '%s --help')",
				args[0], cmd.CommandPath(), strings.Join(subNames(cmd), ", "), cmd.CommandPath()))
		},
		RunE: func(cmd *cobra.Command, _ []string) error {
			return fmt.Errorf("%s needs to be told what to %s", cmd.CommandPath(), what)
		},
	}
	c.AddCommand(subs...)
	return c
}

// subNames are the names of cmd's visible subcommands.
func subNames(cmd *cobra.Command) []string {
	var names []string
	for _, c := range cmd.Commands() {
		if c.IsAvailableCommand() {
			names = append(names, c.Name())
		}
	}
	return names
}

// runE wraps a command body so that its unmarked errors end nicoctl with
// ExitFailed (cobra's own errors are usage errors).
func runE(fn func(cmd *cobra.Command, args []string) error) func(*cobra.Command, []string) error {
	return func(cmd *cobra.Command, args []string) error {
		err := fn(cmd, args)
		var e *exitError
		if err != nil && !errors.As(err, &e) {
			return withCode(ExitFailed, err)
		}
		return err
	}
}
