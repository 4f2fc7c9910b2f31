package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/store"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// poolCmd is `nicoctl pool`: machine pools of libvirt VMs and their
// machines. The leader places and scales them; these commands only write the
// pool's spec and read what was observed.
func (a *app) poolCmd() *cobra.Command {
	var file string
	apply := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update a MachinePool from a YAML or JSON file (- for stdin)",
		Args:  cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.applyPool(cmd.Context(), cmd.InOrStdin(), file)
		}),
	}
	apply.Flags().StringVarP(&file, "file", "f", "", "the MachinePool (apiVersion, kind, metadata.name, spec)")
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
	return group("pool", "Machine pools of libvirt VMs", "pool: apply, get, machines or scale", apply, get, machines, scale)
}

// readPool decodes a MachinePool, refusing unknown fields.
func readPool(r io.Reader) (*api.MachinePool, error) {
	raw, err := io.ReadAll(r)
	if err != nil {
		return nil, err
	}
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return nil, fmt.Errorf("not YAML or JSON: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return nil, err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	p := &api.MachinePool{}
	if err := dec.Decode(p); err != nil {
		return nil, fmt.Errorf("MachinePool: %w", err)
	}
	switch {
	case p.Kind != api.KindMachinePool:
		return nil, fmt.Errorf("kind %q is not accepted; want %s", p.Kind, api.KindMachinePool)
	case apiVersionErr(p) != nil:
		return nil, apiVersionErr(p)
	case p.Metadata.Name == "":
		return nil, errors.New("metadata.name is empty; name the pool")
	case !dnsLabelRE.MatchString(p.Metadata.Name):
		return nil, fmt.Errorf("metadata.name %q is not accepted; use a DNS label: 1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit", p.Metadata.Name)
	case p.Spec.Count < 0:
		return nil, fmt.Errorf("spec.count %d is not accepted; want 0 or more", p.Spec.Count)
	}
	return p, nil
}

// dnsLabelRE matches an RFC 1123 label: pool names become machine and
// domain names.
var dnsLabelRE = regexp.MustCompile(`^[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?$`)

func (a *app) applyPool(ctx context.Context, stdin io.Reader, file string) error {
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
		return updatePool(ctx, c.st, p.Metadata.Name, true, func(old *api.MachinePool) { old.Spec = p.Spec })
	})
}

func (a *app) scalePool(cmd *cobra.Command, args []string) error {
	n, err := strconv.Atoi(args[1])
	if err != nil || n < 0 {
		return withCode(ExitUsage, fmt.Errorf("count %q is not accepted; want 0 or more", args[1]))
	}
	return a.withCluster(cmd.Context(), func(ctx context.Context, c *cluster) error {
		return updatePool(ctx, c.st, args[0], false, func(p *api.MachinePool) { p.Spec.Count = n })
	})
}

// planPool returns the write of p's spec over the stored pool (keeping its
// status), or its creation.
func planPool(ctx context.Context, st *store.Store, p *api.MachinePool) (write, error) {
	name := p.Metadata.Name
	stored := api.NewMachinePool(name)
	w := write{key: store.PoolKey(name)}
	switch err := st.Get(ctx, w.key, stored); {
	case errors.Is(err, store.ErrNotFound):
		stored.Metadata.CreatedAt = time.Now().UTC()
		stored.Spec = p.Spec
		w.obj, w.msg = stored, "MachinePool "+name+" created"
	case err != nil:
		return write{}, fmt.Errorf("reading machine pool %s: %w", name, err)
	case specsEqual(stored.Spec, p.Spec):
		w.rev, w.msg = stored.Metadata.Revision, "MachinePool "+name+" unchanged"
	default:
		w.rev = stored.Metadata.Revision
		stored.Spec = p.Spec
		w.obj, w.msg = stored, "MachinePool "+name+" configured"
	}
	return w, nil
}

// updatePool changes a pool's spec with compare-and-swap, creating it when
// create is set.
func updatePool(ctx context.Context, st *store.Store, name string, create bool, change func(*api.MachinePool)) error {
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
