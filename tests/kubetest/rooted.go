package kubetest

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/apply"
	"github.com/homystack/nico/pkg/pki"
)

// rooted is the exec applier of one sandbox machine: the machine's files
// live under its own root directory, as if it were a host of its own. It
// writes the generation's additional files into Root/flake-<generation>/
// (what the nixos applier writes into the checked-out flake) and moves its
// host files under Root before the exec applier writes them.
type rooted struct {
	m       *Machine
	inner   *apply.Exec
	secrets apply.Secrets
}

// Apply implements apply.Applier.
func (r *rooted) Apply(ctx context.Context, gen apply.Generation) (apply.Result, error) {
	spec := gen.Spec
	spec.HostFiles = slices.Clone(spec.HostFiles)
	for i := range spec.HostFiles {
		spec.HostFiles[i].Path = r.m.Path(spec.HostFiles[i].Path)
	}
	if err := r.writeFlakeFiles(ctx, gen.Number, gen.Spec.AdditionalFiles); err != nil {
		return apply.Result{}, err
	}
	gen.Spec = spec
	return r.inner.Apply(ctx, gen)
}

// Current implements apply.Applier.
func (r *rooted) Current(ctx context.Context) (string, error) { return r.inner.Current(ctx) }

func (r *rooted) writeFlakeFiles(ctx context.Context, number int64, files []api.AdditionalFile) error {
	dir := r.m.flakeDir(number)
	if err := os.RemoveAll(dir); err != nil {
		return fmt.Errorf("kubetest: %s: %w", dir, err)
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("kubetest: %s: %w", dir, err)
	}
	for i, f := range files {
		content := []byte(f.Inline)
		if f.SecretRef != nil {
			if r.secrets == nil {
				return fmt.Errorf("%w: additionalFiles[%d] (%s): secretRef %s but no secrets", apply.ErrInvalid, i, f.Path, f.SecretRef.Name)
			}
			sec, err := r.secrets.Secret(ctx, f.SecretRef.Name)
			if err != nil {
				return fmt.Errorf("%w: additionalFiles[%d] (%s): %w", apply.ErrFetch, i, f.Path, err)
			}
			v, ok := sec[f.SecretRef.Key]
			if !ok {
				return fmt.Errorf("%w: additionalFiles[%d] (%s): secret %s has no key %q", apply.ErrInvalid, i, f.Path, f.SecretRef.Name, f.SecretRef.Key)
			}
			content = v
		}
		if err := pki.WriteFile(filepath.Join(dir, f.Path), content); err != nil {
			return fmt.Errorf("kubetest: additionalFiles[%d]: %w", i, err)
		}
	}
	return nil
}

// flakeDir is where generation number's additional files are.
func (m *Machine) flakeDir(number int64) string {
	return filepath.Join(m.Root, "flake-"+strconv.FormatInt(number, 10))
}

// Path is where an absolute host path lies on this machine.
func (m *Machine) Path(hostPath string) string { return filepath.Join(m.Root, hostPath) }
