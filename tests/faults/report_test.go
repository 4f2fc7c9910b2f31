package faults

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"
)

// EnvReport names the file the summary table is appended to (make
// e2e-faults sets it); without it the table goes to the test log only.
const EnvReport = "NICO_FAULTS_REPORT"

// row is one run of one scenario in the summary.
type row struct {
	Scenario   string
	Violations int
	Lost       int
	Verdict    string
	Stall      time.Duration
	Converge   time.Duration
	Ops        int
}

var (
	rowsMu sync.Mutex
	rows   []row
)

func record(r row) {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	rows = append(rows, r)
}

// reportDir is where the report and visualisations go: beside the
// report file, else the temporary directory.
func reportDir() string {
	if p := os.Getenv(EnvReport); p != "" {
		return filepath.Dir(p)
	}
	return os.TempDir()
}

// summary renders the rows as a table, one line per scenario (runs
// aggregated: violations and lost writes summed, the worst verdict,
// stall and convergence time).
func summary() string {
	rowsMu.Lock()
	defer rowsMu.Unlock()
	type agg struct {
		row
		runs int
	}
	var order []string
	by := map[string]*agg{}
	for _, r := range rows {
		a, ok := by[r.Scenario]
		if !ok {
			a = &agg{row: row{Scenario: r.Scenario, Verdict: "Ok"}}
			by[r.Scenario] = a
			order = append(order, r.Scenario)
		}
		a.runs++
		a.Violations += r.Violations
		a.Lost += r.Lost
		a.Ops += r.Ops
		if r.Verdict != "Ok" {
			a.Verdict = r.Verdict
		}
		a.Stall = max(a.Stall, r.Stall)
		a.Converge = max(a.Converge, r.Converge)
	}
	var b strings.Builder
	fmt.Fprintf(&b, "| scenario | runs | invariant violations | lost writes | linearizable | client ops | longest client stall | time to converge |\n")
	fmt.Fprintf(&b, "|---|---|---|---|---|---|---|---|\n")
	for _, s := range order {
		a := by[s]
		fmt.Fprintf(&b, "| %s | %d | %d | %d | %s | %d | %s | %s |\n", s, a.runs, a.Violations, a.Lost, a.Verdict, a.Ops, fmtDur(a.Stall), fmtDur(a.Converge))
	}
	return b.String()
}

// writeReport appends the summary to the report file, if one is set.
func writeReport() error {
	p := os.Getenv(EnvReport)
	if p == "" || len(rows) == 0 {
		return nil
	}
	f, err := os.OpenFile(p, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		return fmt.Errorf("faults: report: %w", err)
	}
	defer f.Close()
	_, err = fmt.Fprintf(f, "%s\n", summary())
	return err
}
