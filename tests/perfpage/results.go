package main

import (
	"bufio"
	"fmt"
	"io"
	"regexp"
	"strconv"
	"strings"
)

// Result is one benchmark's line of `go test -bench` output: its name
// (without the GOMAXPROCS suffix), the package it ran in, and the figures
// it reported, in the order printed.
type Result struct {
	Package string
	Name    string
	Figures []Figure
}

// Figure is one value a benchmark reported: Go's own (ns/op, B/op,
// allocs/op) or one of b.ReportMetric's.
type Figure struct {
	Unit  string
	Value string
}

// Run is what one `go test -bench` output holds: the CPU go test named and
// the results of every package, in order.
type Run struct {
	CPU     string
	Results []Result
}

// goFigures are the units testing prints for every benchmark; a benchmark
// that reports its own figures (-benchtime 1x, one measurement per run)
// means those, and the page shows only them.
var goFigures = map[string]bool{"ns/op": true, "B/op": true, "allocs/op": true, "MB/s": true}

var (
	benchLine = regexp.MustCompile(`^(Benchmark[^\s:]+?)(-\d+)?\s+(\d+)\s+(.*)$`)
	failLine  = regexp.MustCompile(`^(--- FAIL: |FAIL\s|FAIL$|panic: )`)
)

// Parse reads `go test -bench` output. It refuses output that holds a
// failure (a benchmark or a package that failed, a panic) or no result:
// a page must not show the figures of a run that failed.
func Parse(r io.Reader) (Run, error) {
	var run Run
	pkg := ""
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for n := 1; sc.Scan(); n++ {
		line := sc.Text()
		if failLine.MatchString(line) {
			return Run{}, fmt.Errorf("line %d: %q: the run failed; its figures are not recorded", n, line)
		}
		if v, ok := strings.CutPrefix(line, "pkg: "); ok {
			pkg = strings.TrimSpace(v)
			continue
		}
		if v, ok := strings.CutPrefix(line, "cpu: "); ok {
			run.CPU = strings.TrimSpace(v)
			continue
		}
		m := benchLine.FindStringSubmatch(line)
		if m == nil {
			continue
		}
		figs, err := figures(m[4])
		if err != nil {
			return Run{}, fmt.Errorf("line %d: %s: %w", n, m[1], err)
		}
		run.Results = append(run.Results, Result{Package: pkg, Name: m[1], Figures: figs})
	}
	if err := sc.Err(); err != nil {
		return Run{}, err
	}
	if len(run.Results) == 0 {
		return Run{}, fmt.Errorf("no benchmark result (a line \"BenchmarkName  N  value unit ...\")")
	}
	return run, nil
}

// figures reads a result line's "value unit" pairs and keeps the
// benchmark's own figures when it reported any.
func figures(s string) ([]Figure, error) {
	f := strings.Fields(s)
	if len(f)%2 != 0 {
		return nil, fmt.Errorf("figures %q: want pairs of a value and a unit", s)
	}
	var own, all []Figure
	for i := 0; i < len(f); i += 2 {
		if _, err := strconv.ParseFloat(f[i], 64); err != nil {
			return nil, fmt.Errorf("figure %q %q: the value is not a number", f[i], f[i+1])
		}
		fig := Figure{Unit: f[i+1], Value: f[i]}
		all = append(all, fig)
		if !goFigures[fig.Unit] {
			own = append(own, fig)
		}
	}
	if len(own) > 0 {
		return own, nil
	}
	return all, nil
}
