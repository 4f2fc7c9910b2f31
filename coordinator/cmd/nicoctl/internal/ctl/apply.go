package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/spf13/cobra"
)

// applyCmd is `nicoctl apply -f FILE`: create or update the objects in the
// file, by their kind. If any is refused, none is written.
func (a *app) applyCmd() *cobra.Command {
	var file string
	var force bool
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update EtcdCluster, MachinePool and KubernetesCluster objects from a YAML or JSON file (- for stdin)",
		Long: `Create or update the objects of a YAML or JSON file (- for stdin); the file
may hold several YAML documents, separated by ---. Each document's kind picks
what it is: EtcdCluster (the fleet's one etcd cluster, name etcd), MachinePool
or KubernetesCluster (apiVersion nico.homystack.io/v1alpha1; the others
nico.homystack.io/v1). The deprecated group nico.homystack.com is accepted
with a warning on stderr.

Every document is checked before anything is written, and all are written in
one etcd transaction: if one is refused, none is written. A bad field (an
unknown field, a wrong apiVersion or kind, both machines and a selector, a
negative count, a bad label selector, a version outside the table) ends
nicoctl with 2; a change refused against what is stored or running (an etcd
version path etcd does not support, an external member etcd already has, an
etcd provider change on a live cluster, a Kubernetes version change that is
not one step, a Kubernetes version that does not support the fleet's etcd)
with 3. Each refusal names the field's path, the value and what is accepted.

A KubernetesCluster's metadata.generation counts its spec's changes; its
status is the controller's and is kept.

An object the flake declares (services.nico.objects, marked metadata.declared)
is refused with 3 unless --force: change it in the flake. A file whose first
document is a FlakeObjects header is a manifest the NixOS module rendered: it
is applied as the agent on a control-plane host applies it (the manifests'
order, the flake's marks, the removal of objects it no longer declares;
docs/declared-objects.md), recorded as applied by nicoctl@HOST.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.apply(cmd.Context(), cmd.InOrStdin(), file, force)
		}),
	}
	c.Flags().StringVarP(&file, "file", "f", "", "the objects (apiVersion, kind, metadata.name, spec), one per YAML document")
	c.Flags().BoolVar(&force, "force", false, "write over objects the flake declares (services.nico.objects); its next apply writes them back")
	return c
}

// readFile reads -f FILE, or stdin for "-".
func readFile(stdin io.Reader, file string) ([]byte, error) {
	switch file {
	case "":
		return nil, withCode(ExitUsage, errors.New("apply needs -f FILE (or -f - for stdin)"))
	case "-":
		b, err := io.ReadAll(stdin)
		return b, withCode(ExitUsage, err)
	default:
		b, err := os.ReadFile(file)
		return b, withCode(ExitUsage, err)
	}
}

// objectCluster is the connection as the apply path reads and writes.
func (a *app) objectCluster(c *cluster) *objectapply.Cluster {
	return &objectapply.Cluster{Store: c.st, Client: c.cli, Health: c.health, Now: a.now}
}

// applyErr ends nicoctl with the code of the apply's error: 2 for a
// document refused on its own, 3 for one refused against the cluster.
func applyErr(err error) error {
	var invalid *objectapply.InvalidError
	var refused *objectapply.RefusedError
	switch {
	case errors.As(err, &invalid):
		return withCode(ExitUsage, err)
	case errors.As(err, &refused):
		return withCode(ExitRefused, err)
	}
	return err
}

func (a *app) apply(ctx context.Context, stdin io.Reader, file string, force bool) error {
	raw, err := readFile(stdin, file)
	if err != nil {
		return err
	}
	docs, err := objectapply.Split(file, raw)
	if err != nil {
		return applyErr(err)
	}
	warn := func(s string) { fmt.Fprintf(a.stderr, "nicoctl: warning: %s\n", s) }
	if err := objectapply.Decode(docs, warn); err != nil {
		return applyErr(err)
	}
	manifest := false
	for _, d := range docs {
		manifest = manifest || d.Kind == api.KindFlakeObjects
	}
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		if manifest {
			host, _ := os.Hostname()
			res, err := a.objectCluster(c).ApplyFlake(ctx, docs, "nicoctl@"+host)
			if err != nil {
				return applyErr(err)
			}
			fmt.Fprintln(a.stdout, res.Decision.Reason)
			for _, m := range res.Messages {
				fmt.Fprintln(a.stdout, m)
			}
			return nil
		}
		msgs, err := a.objectCluster(c).Apply(ctx, docs, objectapply.Options{Force: force})
		if err != nil {
			return applyErr(err)
		}
		for _, m := range msgs {
			fmt.Fprintln(a.stdout, m)
		}
		return nil
	})
}

// upgradeAPIVersion replaces a deprecated apiVersion in obj, read from
// at, with the current one and warns on stderr: the field, the value and
// what to write instead.
func (a *app) upgradeAPIVersion(at string, obj api.Object) {
	if old, _ := api.UpgradeAPIVersions(obj); old != "" {
		fmt.Fprintf(a.stderr, "nicoctl: warning: %s: %s\n", at, api.DeprecationWarning(api.APIVersionFor(obj), old))
	}
}
