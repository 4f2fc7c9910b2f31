package ctl

import (
	"context"
	"errors"
	"fmt"
	"io"

	"github.com/homystack/nico/pkg/api"
	"github.com/homystack/nico/pkg/objectapply"
	"github.com/homystack/nico/pkg/store"
)

// declaredLines say whether obj is the flake's (services.nico.objects)
// and where its running spec differs from the flake's, as the record of
// the applied manifest keeps it; nil for an object the flake does not
// declare.
func declaredLines(ctx context.Context, c *cluster, obj api.Object, spec any) ([]string, error) {
	d := obj.GetMetadata().Declared
	if d == nil {
		return nil, nil
	}
	rec := &api.FlakeObjects{}
	switch err := c.st.Get(ctx, store.FlakeObjectsKey, rec); {
	case errors.Is(err, store.ErrNotFound):
		rec = nil
	case err != nil:
		return nil, fmt.Errorf("reading the record of the flake's objects: %w", err)
	}
	out := []string{fmt.Sprintf("in the flake, revision %s, applied by %s (nicoctl apply and delete need --force)", d.Revision, d.Host)}
	drift, err := objectapply.Drift(rec, obj.GetTypeMeta().Kind, obj.GetMetadata().Name, spec)
	if err != nil {
		return nil, fmt.Errorf("comparing with the flake's spec: %w", err)
	}
	if rec != nil && rec.Spec.Revision != d.Revision {
		out = append(out, fmt.Sprintf("the fleet's manifest is revision %s (applied by %s); this object was last written by revision %s", rec.Spec.Revision, rec.Status.Host, d.Revision))
	}
	if len(drift) == 0 {
		return append(out, "drift from the flake: none"), nil
	}
	out = append(out, fmt.Sprintf("drift from the flake: %d fields (the flake's next apply writes its spec back)", len(drift)))
	for _, l := range drift {
		out = append(out, "  "+l)
	}
	return out, nil
}

// printDeclared writes declaredLines under a Declared: heading.
func printDeclared(w io.Writer, lines []string) {
	if len(lines) == 0 {
		return
	}
	fmt.Fprintln(w, "Declared:")
	for _, l := range lines {
		fmt.Fprintln(w, "  "+l)
	}
}
