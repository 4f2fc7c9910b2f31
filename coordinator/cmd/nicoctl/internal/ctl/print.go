package ctl

import (
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"text/tabwriter"
	"time"

	"gopkg.in/yaml.v3"
)

// emit writes v as JSON or YAML when the output asks for it, else calls
// table with a tab writer that is flushed afterwards.
func (a *app) emit(v any, table func(w io.Writer)) error {
	switch a.cfg.Output {
	case "json":
		enc := json.NewEncoder(a.stdout)
		enc.SetIndent("", "  ")
		return enc.Encode(v)
	case "yaml":
		return writeYAML(a.stdout, v)
	default:
		tw := tabwriter.NewWriter(a.stdout, 0, 4, 3, ' ', 0)
		table(tw)
		return tw.Flush()
	}
}

// writeYAML writes v as YAML with the field names and order of its JSON
// form: it is marshalled to JSON and re-read as a YAML document.
func writeYAML(w io.Writer, v any) error {
	b, err := json.Marshal(v)
	if err != nil {
		return err
	}
	var doc yaml.Node
	if err := yaml.Unmarshal(b, &doc); err != nil {
		return err
	}
	blockStyle(&doc)
	enc := yaml.NewEncoder(w)
	enc.SetIndent(2)
	if err := enc.Encode(&doc); err != nil {
		return err
	}
	return enc.Close()
}

// blockStyle clears the flow and quoting styles JSON brings, so the YAML is
// written in block style and quoted only where needed.
func blockStyle(n *yaml.Node) {
	n.Style = 0
	for _, c := range n.Content {
		blockStyle(c)
	}
}

// row writes one tab-separated table row.
func row(w io.Writer, cols ...any) {
	parts := make([]string, len(cols))
	for i, c := range cols {
		s := fmt.Sprint(c)
		if s == "" {
			s = "-"
		}
		parts[i] = s
	}
	fmt.Fprintln(w, strings.Join(parts, "\t"))
}

// field writes one "Key:\tvalue" line of a description.
func field(w io.Writer, key string, v any) {
	s := fmt.Sprint(v)
	if s == "" {
		s = "-"
	}
	fmt.Fprintf(w, "%s:\t%s\n", key, s)
}

// age formats how long ago t was, kubectl style; "-" when t is unset.
func age(now, t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	d := now.Sub(t)
	switch {
	case d < 0:
		return "0s"
	case d < 2*time.Minute:
		return fmt.Sprintf("%ds", int(d.Seconds()))
	case d < 2*time.Hour:
		return fmt.Sprintf("%dm", int(d.Minutes()))
	case d < 48*time.Hour:
		return fmt.Sprintf("%dh", int(d.Hours()))
	default:
		return fmt.Sprintf("%dd", int(d.Hours()/24))
	}
}

// yesNo renders a flag for a table.
func yesNo(b bool) string {
	if b {
		return "yes"
	}
	return "no"
}

// oneLine keeps a message on one table line.
func oneLine(s string) string {
	return strings.Join(strings.Fields(s), " ")
}
