package ctl

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"

	"github.com/homystack/nico/pkg/api"
	"github.com/spf13/cobra"
	"gopkg.in/yaml.v3"
)

// applyCmd is `nicoctl apply -f FILE`: create or update the object in the
// file, by its kind (EtcdCluster or MachinePool). A refused object is not
// written.
func (a *app) applyCmd() *cobra.Command {
	var file string
	c := &cobra.Command{
		Use:   "apply -f FILE",
		Short: "Create or update an EtcdCluster or MachinePool from a YAML or JSON file (- for stdin)",
		Long: `Create or update an object from a YAML or JSON file (- for stdin); its kind
picks what it is: EtcdCluster (the fleet's one etcd cluster, name etcd) or
MachinePool. The object is checked before anything is written: a bad field
ends nicoctl with 2, a change refused against the cluster (a version path
etcd does not support, an external member etcd already has) with 3; either
way nothing is written.`,
		Args: cobra.NoArgs,
		RunE: runE(func(cmd *cobra.Command, _ []string) error {
			return a.apply(cmd.Context(), cmd.InOrStdin(), file)
		}),
	}
	c.Flags().StringVarP(&file, "file", "f", "", "the object (apiVersion, kind, metadata.name, spec)")
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

// decodeStrict decodes a YAML or JSON document into v through its JSON
// form (the objects' field names), refusing unknown fields.
func decodeStrict(raw []byte, v any) error {
	var doc any
	if err := yaml.Unmarshal(raw, &doc); err != nil {
		return fmt.Errorf("not YAML or JSON: %w", err)
	}
	b, err := json.Marshal(doc)
	if err != nil {
		return err
	}
	dec := json.NewDecoder(bytes.NewReader(b))
	dec.DisallowUnknownFields()
	return dec.Decode(v)
}

func (a *app) apply(ctx context.Context, stdin io.Reader, file string) error {
	raw, err := readFile(stdin, file)
	if err != nil {
		return err
	}
	var tm struct {
		Kind string `yaml:"kind"`
	}
	if err := yaml.Unmarshal(raw, &tm); err != nil {
		return withCode(ExitUsage, fmt.Errorf("%s: not YAML or JSON: %w", file, err))
	}
	switch tm.Kind {
	case api.KindEtcdCluster:
		ec, err := readEtcdCluster(raw)
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("%s: EtcdCluster refused, nothing written:\n%w", file, err))
		}
		return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
			return a.applyEtcdCluster(ctx, c, ec)
		})
	case api.KindMachinePool:
		p, err := readPool(bytes.NewReader(raw))
		if err != nil {
			return withCode(ExitUsage, fmt.Errorf("%s: %w", file, err))
		}
		return a.withCluster(ctx, func(ctx context.Context, c *cluster) error {
			return updatePool(ctx, c.st, p.Metadata.Name, true, func(old *api.MachinePool) { old.Spec = p.Spec })
		})
	default:
		return withCode(ExitUsage, fmt.Errorf("%s: kind %q is not accepted; want %s or %s", file, tm.Kind, api.KindEtcdCluster, api.KindMachinePool))
	}
}
