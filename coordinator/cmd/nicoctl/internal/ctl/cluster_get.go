package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/secretbox"
	"github.com/homystack/nico/pkg/secrets"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// clusterAliases are the names of the KubernetesCluster kind on the
// command line.
var clusterAliases = []string{"cluster", "kubernetescluster", "kubernetesclusters", "kc"}

// clustersGetCmd is `nicoctl get clusters [NAME]`.
func (a *app) clustersGetCmd() *cobra.Command {
	return &cobra.Command{
		Use:     "clusters [NAME]",
		Aliases: clusterAliases,
		Short:   "List KubernetesClusters: phase, control plane and data plane ready/total, version, age",
		Args:    cobra.MaximumNArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error {
			return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
				kcs, err := listClusters(ctx, c.st)
				if err != nil {
					return err
				}
				if len(args) == 1 {
					kcs = keepIf(kcs, func(k *api.KubernetesCluster) bool { return k.Metadata.Name == args[0] })
					if len(kcs) == 0 {
						return withCode(ExitNotFound, fmt.Errorf("no KubernetesCluster named %s; list them with 'nicoctl get clusters'", args[0]))
					}
				}
				now := a.now()
				return a.emit(kcs, func(w io.Writer) {
					row(w, "NAME", "PHASE", "CONTROL PLANE", "DATA PLANE", "VERSION", "AGE")
					for _, k := range kcs {
						phase := string(k.Status.Phase)
						if k.Deleting() && k.Status.Phase != api.ClusterDeleting {
							phase = string(api.ClusterDeleting) + " (requested)"
						}
						row(w, k.Metadata.Name, phase, readyTotal(k.Status.ControlPlane), readyTotal(k.Status.DataPlane),
							versionCell(k), age(now, k.Metadata.CreatedAt))
					}
				})
			})
		}),
	}
}

// listClusters reads every KubernetesCluster, by name.
func listClusters(ctx context.Context, st *store.Store) ([]*api.KubernetesCluster, error) {
	kcs, _, err := store.List[api.KubernetesCluster](ctx, st, store.ClustersDir)
	if err != nil {
		return nil, fmt.Errorf("reading KubernetesClusters: %w", err)
	}
	return kcs, nil
}

// getKubernetesCluster reads cluster name; absent ends nicoctl with
// ExitNotFound.
func getKubernetesCluster(ctx context.Context, st *store.Store, name string) (*api.KubernetesCluster, error) {
	kc := &api.KubernetesCluster{}
	err := st.Get(ctx, store.ClusterKey(name), kc)
	if errors.Is(err, store.ErrNotFound) {
		return nil, withCode(ExitNotFound, fmt.Errorf("no KubernetesCluster named %s; list them with 'nicoctl get clusters'", name))
	}
	if err != nil {
		return nil, fmt.Errorf("reading KubernetesCluster %s: %w", name, err)
	}
	return kc, nil
}

// readyTotal is "2/3".
func readyTotal(r api.ReplicaStatus) string { return fmt.Sprintf("%d/%d", r.Ready, r.Total) }

// versionCell is the spec's version, and the one the machines run while
// they differ.
func versionCell(k *api.KubernetesCluster) string {
	v, run := k.Spec.Version, k.Status.Version
	if run != "" && run != v {
		return fmt.Sprintf("%s (runs %s)", orDash(v), run)
	}
	return v
}

func orDash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

// kubeconfigOpts are the flags of get kubeconfig.
type kubeconfigOpts struct {
	file string
}

// kubeconfigGetCmd is `nicoctl get kubeconfig NAME [--file FILE]`.
func (a *app) kubeconfigGetCmd() *cobra.Command {
	var o kubeconfigOpts
	c := &cobra.Command{
		Use:   "kubeconfig NAME",
		Short: "Write a KubernetesCluster's admin kubeconfig (its secret <cluster>-kubeconfig, key value) to stdout or --file",
		Long: `Write the admin kubeconfig of KubernetesCluster NAME, as the leader published it
(the named secret status.kubeconfigSecret, by default <NAME>-kubeconfig, key
value), so that kubectl --kubeconfig works at once. With spec.kubeconfig.path,
it is the distribution's own file, published by a control-plane machine's agent
with its server rewritten to the control-plane endpoint. Named secrets are sealed
with the store's secrets key: run it on a control-plane machine or give
--secrets.keyFile. --file writes the file with mode 0600, replacing what is
there; without it the kubeconfig goes to standard output.

Exit codes: 0 written, 4 no such cluster or no kubeconfig yet (the leader
writes it once the control plane is ready), 2 no secrets key or no cluster
to reach, 1 reading or writing failed.`,
		Args: cobra.ExactArgs(1),
		RunE: runE(func(cmd *cobra.Command, args []string) error { return a.getKubeconfig(cmd.Context(), args[0], o) }),
	}
	c.Flags().StringVar(&o.file, "file", "", "write the kubeconfig to this file (mode 0600) instead of standard output")
	return c
}

func (a *app) getKubeconfig(ctx context.Context, name string, o kubeconfigOpts) error {
	box, err := secretbox.Load(a.cfg.Secrets.KeyFile)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("nicoctl get kubeconfig needs the store's secrets key (secrets.keyFile): %w; run it on a control-plane machine or give --secrets.keyFile", err))
	}
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		kc, err := getKubernetesCluster(ctx, c.st, name)
		if err != nil {
			return err
		}
		secretName := kc.Status.KubeconfigSecret
		if secretName == "" {
			secretName = api.KubeconfigSecretName(name)
		}
		sec := api.NewSecret(secretName)
		err = secrets.New(c.st, box).Get(ctx, store.NamedSecretKey(secretName), sec)
		if errors.Is(err, store.ErrNotFound) {
			return withCode(ExitNotFound, fmt.Errorf("KubernetesCluster %s has no kubeconfig yet (secret %s): the leader writes it once the control plane is ready; the cluster is %s", name, secretName, orDash(string(kc.Status.Phase))))
		}
		if err != nil {
			return fmt.Errorf("reading secret %s: %w", secretName, err)
		}
		value, ok := sec.Spec.Data[api.KubeconfigSecretKey]
		if !ok || len(value) == 0 {
			return fmt.Errorf("secret %s has no key %q", secretName, api.KubeconfigSecretKey)
		}
		if o.file == "" {
			_, err := a.stdout.Write(value)
			return err
		}
		if err := writePrivate(o.file, value); err != nil {
			return err
		}
		fmt.Fprintf(a.stderr, "kubeconfig of %s written to %s; use it with kubectl --kubeconfig %s\n", name, o.file, o.file)
		return nil
	})
}

// writePrivate writes b to path with mode 0600, atomically: a temporary
// file in the same directory renamed over it.
func writePrivate(path string, b []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".*")
	if err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if _, err := f.Write(b); err != nil {
		f.Close()
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("writing %s: %w", path, err)
	}
	return nil
}
