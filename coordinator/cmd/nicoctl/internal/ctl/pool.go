package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
)

// poolCmd is `nicoctl pool`: machine pools of libvirt VMs and their
// machines. The leader places and scales them; these commands only write the
// pool's spec and read what was observed.
func (a *app) poolCmd() *cobra.Command {
	var file string
	var force bool
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update a MachinePool from a YAML or JSON file (- for stdin)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.applyPool(cmd.Context(), cmd.InOrStdin(), file, force)
		}),
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "the MachinePool (apiVersion, kind, metadata.name, spec)")
	apply.Flags().BoolVar(&force, "force", false, "write over a pool the flake declares (services.nico.objects)")
	get := &cobra.Command{
		Use:   "get [NAME]",
		Short: "List machine pools with their counts and conditions",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(a.getPools),
	}
	machines := &cobra.Command{
		Use:   "machines [POOL]",
		Short: "List machines: host, phase, domain state, addresses, conditions",
		Args:  cobra.MaximumNArgs(1),
		RunE:  runE(a.getMachines),
	}
	scale := &cobra.Command{
		Use:   "scale NAME COUNT",
		Short: "Set a pool's count (scaling down removes machines' nodes safely first)",
		Args:  cobra.ExactArgs(2),
		RunE:  runE(a.scalePool),
	}
	scale.Flags().BoolVar(&force, "force", false, "scale a pool the flake declares (services.nico.objects)")
	return group("pool", "Machine pools of libvirt VMs", "pool: apply, get, machines or scale", apply, get, machines, scale)
}

// readPool decodes a MachinePool, refusing unknown fields
// (objectapply.ReadPool).
func readPool(r io.Reader) (*api.MachinePool, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	return objectapply.ReadPool(raw)
}

func (a *app) applyPool(ctx context.Context, stdin io.Reader, file string, force bool) error {
	var r io.Reader
	switch file {
	case "":
		return withCode(ExitUsage, errors.New("pool apply needs -f FILE (or -f - for stdin)"))
	case "-":
		r = stdin
	default:
		f, err := os.Open(file)
		if err != nil {
			return withCode(ExitUsage, err)
		}
		defer f.Close()
		r = f
	}
	p, err := readPool(r)
	if err != nil {
		return withCode(ExitUsage, fmt.Errorf("%s: %w", file, err))
	}
	a.upgradeAPIVersion(file, p)
	return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
		return updatePool(ctx, c.st, p.Metadata.Name, true, force, func(old *api.MachinePool) { old.Spec = p.Spec })
	})
}

func (a *app) scalePool(cmd *cobra.Command, args []string) error {
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		return withCode(ExitUsage, fmt.Errorf("count %q is not accepted; want 0 or more", args[1]))
	}
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		force, _ := cmd.Flags().GetBool("force")
		return updatePool(ctx, c.st, args[0], false, force, func(p *api.MachinePool) { p.Spec.Count = n })
	})
}

// updatePool changes a pool's spec with compare-and-swap, creating it when
// create is set. A pool the flake declares is refused unless force.
func updatePool(ctx context.Context, st *store.Store, name string, create, force bool, change func(*api.MachinePool)) error {
	for {
		p := api.NewMachinePool(name)
		err := st.Get(ctx, store.PoolKey(name), p)
		switch {
		case errors.Is(err, store.ErrNotFound) && create:
			p.Metadata.CreatedAt = time.Now().UTC()
			change(p)
			err = st.CreateObject(ctx, p)
		case errors.Is(err, store.ErrNotFound):
			return withCode(ExitNotFound, fmt.Errorf("no machine pool %q", name))
		case err != nil:
			return err
		case p.Metadata.Declared != nil && !force:
			return withCode(ExitRefused, objectapply.OwnedError(p))
		default:
			change(p)
			err = st.UpdateObject(ctx, p)
		}
		if !errors.Is(err, store.ErrConflict) && !errors.Is(err, store.ErrExists) {
			return err
		}
	}
}

func (a *app) getPools(cmd *cobra.Command, args []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		pools, _, err := store.List[api.MachinePool](ctx, c.st, store.PoolsDir)
		if err != nil {
			return err
		}
		if len(args) == 1 {
			pools = keepIf(pools, func(p *api.MachinePool) bool { return p.Metadata.Name == args[0] })
			if len(pools) == 0 {
				return withCode(ExitNotFound, fmt.Errorf("no machine pool %q", args[0]))
			}
		}
		now := a.now()
		return a.emit(pools, func(w io.Writer) {
			row(w, "NAME", "COUNT", "MACHINES", "RUNNING", "PENDING", "VCPUS", "MEMORY", "DISK", "IMAGE", "NETWORK", "AGE", "CONDITIONS")
			for _, p := range pools {
				t := p.Spec.Template
				row(w, p.Metadata.Name, p.Spec.Count, p.Status.Machines, p.Status.Running, p.Status.Pending, t.VCPUs,
					fmt.Sprintf("%dMiB", t.MemoryMiB), fmt.Sprintf("%dGiB", t.DiskGiB), t.Image(), t.Network, age(now, p.Metadata.CreatedAt), conditionCell(p.Status.Conditions))
			}
		})
	})
}

func (a *app) getMachines(cmd *cobra.Command, args []string) error {
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		ms, _, err := store.List[api.Machine](ctx, c.st, store.MachinesDir)
		if err != nil {
			return err
		}
		if len(args) == 1 {
			ms = keepIf(ms, func(m *api.Machine) bool { return m.Spec.Pool == args[0] })
		}
		return a.emit(ms, func(w io.Writer) {
			row(w, "NAME", "KIND", "POOL", "HOST", "PHASE", "DOMAIN", "ADDRESSES", "DISCOVERABLE", "CONDITIONS")
			for _, m := range ms {
				row(w, m.Metadata.Name, m.Spec.Kind, m.Spec.Pool, m.Spec.Host, m.Status.Phase, m.Status.DomainState,
					strings.Join(m.Status.Addresses, ","), yesNo(m.Status.Discoverable), conditionCell(m.Status.Conditions))
			}
		})
	})
}

// conditionCell shows the conditions that do not hold, with their messages,
// or the ones that do when all hold.
func conditionCell(cs []api.Condition) string {
	var bad, good []string
	for _, c := range cs {
		if c.Status {
			good = append(good, c.Type)
			continue
		}
		s := c.Type + "=false"
		if c.Message != "" {
			s += " (" + oneLine(c.Message) + ")"
		}
		bad = append(bad, s)
	}
	if len(bad) > 0 {
		return strings.Join(bad, "; ")
	}
	return strings.Join(good, ",")
}

func keepIf[T any](xs []T, keep func(T) bool) []T {
	var out []T
	for _, x := range xs {
		if keep(x) {
			out = append(out, x)
		}
	}
	return out
}
