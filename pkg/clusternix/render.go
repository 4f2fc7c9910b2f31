package clusternix

import (
	"fmt"
	"slices"
	"strings"
)

// Render validates c and returns its cluster.nix: the same bytes for the
// same cluster (nodes sorted by name, etcd endpoints sorted, paths by
// attribute name; a node's addresses keep their order).
func Render(c Cluster) ([]byte, error) {
	if err := Validate(c); err != nil {
		return nil, err
	}
	var b strings.Builder
	w := func(indent int, format string, args ...any) {
		b.WriteString(strings.Repeat("  ", indent))
		fmt.Fprintf(&b, format, args...)
		b.WriteByte('\n')
	}
	w(0, "# cluster.nix of the Kubernetes cluster %s, written by nico: do not edit.", c.Name)
	w(0, "# Schema version %d; check it with nico's lib.clusterSchema.load (nixos-module/lib/cluster-schema.nix).", SchemaVersion)
	w(0, "{")
	w(1, "schemaVersion = %d;", SchemaVersion)
	w(1, "name = %s;", Quote(c.Name))
	w(1, "version = %s;", Quote(strings.TrimPrefix(c.Version, "v")))
	w(1, "controlPlaneEndpoint = { host = %s; port = %d; };", Quote(c.ControlPlaneEndpoint.Host), c.ControlPlaneEndpoint.Port)
	if c.FirstServer == "" {
		w(1, "firstServer = null;")
	} else {
		w(1, "firstServer = %s;", Quote(c.FirstServer))
	}
	w(1, "nodes = {")
	for _, g := range []struct {
		role  string
		nodes []Node
	}{{"controlPlane", c.Nodes.ControlPlane}, {"dataPlane", c.Nodes.DataPlane}} {
		sorted := slices.Clone(g.nodes)
		slices.SortFunc(sorted, func(a, b Node) int { return strings.Compare(a.Name, b.Name) })
		if len(sorted) == 0 {
			w(2, "%s = [ ];", g.role)
			continue
		}
		w(2, "%s = [", g.role)
		for _, n := range sorted {
			w(3, "{ name = %s; addresses = %s; }", Quote(n.Name), list(n.Addresses))
		}
		w(2, "];")
	}
	w(1, "};")
	endpoints := slices.Clone(c.Etcd.Endpoints)
	slices.Sort(endpoints)
	w(1, "etcd = {")
	w(2, "provider = %s;", Quote(string(c.Etcd.Provider)))
	w(2, "endpoints = %s;", list(endpoints))
	if c.Etcd.Prefix == "" {
		w(2, "prefix = null;")
	} else {
		w(2, "prefix = %s;", Quote(c.Etcd.Prefix))
	}
	if x := c.Etcd.Proxy; x != nil {
		w(2, "proxy = { namespace = %s; listen = { host = %s; port = %d; }; clientCommonName = %s; };",
			Quote(x.Namespace), Quote(x.Listen.Host), x.Listen.Port, Quote(x.ClientCommonName))
	}
	w(1, "};")
	renderComponents(w, c.Components, c.Version)
	w(1, "paths = {")
	for _, f := range c.Paths.fields() {
		w(2, "%s = %s;", f.name, Quote(f.value))
	}
	w(1, "};")
	w(0, "}")
	return []byte(b.String()), nil
}

// list renders strings as a Nix list on one line.
func list(items []string) string {
	if len(items) == 0 {
		return "[ ]"
	}
	q := make([]string, len(items))
	for i, s := range items {
		q[i] = Quote(s)
	}
	return "[ " + strings.Join(q, " ") + " ]"
}

// Quote returns s as a double-quoted Nix string literal that evaluates to s:
// '\', '"' and '$' are escaped (so "${" never interpolates), and newline,
// carriage return and tab written \n, \r, \t. Nix strings cannot hold NUL.
func Quote(s string) string {
	var b strings.Builder
	b.Grow(len(s) + 2)
	b.WriteByte('"')
	for i := 0; i < len(s); i++ {
		switch c := s[i]; c {
		case '\\', '"', '$':
			b.WriteByte('\\')
			b.WriteByte(c)
		case '\n':
			b.WriteString(`\n`)
		case '\r':
			b.WriteString(`\r`)
		case '\t':
			b.WriteString(`\t`)
		default:
			b.WriteByte(c)
		}
	}
	b.WriteByte('"')
	return b.String()
}
