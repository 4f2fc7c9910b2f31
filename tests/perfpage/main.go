// Command perfpage writes benchmark figures into docs/performance.md: it
// reads the output of `go test -bench` (what make bench, make bench-scale
// and make e2e-kube tee to a file), and replaces the page's block of that
// name with the figures, the command that measured them, the date and the
// machine. Output holding a failure is refused, and the page is left as it
// was.
//
//	go run ./tests/perfpage -page docs/performance.md -block bench \
//	    -command 'make bench' -load-start 0.4 bench.out
package main

import (
	"flag"
	"fmt"
	"os"
	"runtime"
	"strings"
	"time"
)

func main() {
	if err := run(os.Args[1:]); err != nil {
		fmt.Fprintln(os.Stderr, "perfpage:", err)
		os.Exit(1)
	}
}

func run(args []string) error {
	fs := flag.NewFlagSet("perfpage", flag.ContinueOnError)
	page := fs.String("page", "docs/performance.md", "the page to write")
	block := fs.String("block", "", "the name of the page's block to replace (its markers: <!-- perfpage:NAME begin ... --> and <!-- perfpage:NAME end -->)")
	command := fs.String("command", "", "the command that measured the figures, as the page states it")
	loadStart := fs.String("load-start", "", "the 1-minute load average before the run (from /proc/loadavg)")
	loadEnd := fs.String("load-end", "", "the 1-minute load average after the run (default: /proc/loadavg's now, right after the run)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	switch {
	case *block == "":
		return fmt.Errorf("-block: empty; want the name of a block the page marks")
	case *command == "":
		return fmt.Errorf("-command: empty; want the command that measured the figures")
	case fs.NArg() == 0:
		return fmt.Errorf("no output file: want one or more files of go test -bench output")
	}
	var all Run
	for _, f := range fs.Args() {
		r, err := readRun(f)
		if err != nil {
			return err
		}
		if all.CPU == "" {
			all.CPU = r.CPU
		}
		all.Results = append(all.Results, r.Results...)
	}
	m := thisMachine(time.Now())
	m.LoadStart = *loadStart
	if m.LoadStart == "" {
		m.LoadStart = "unknown"
	}
	if *loadEnd != "" {
		m.LoadEnd = *loadEnd
	}
	old, err := os.ReadFile(*page)
	if err != nil {
		return err
	}
	out, err := Replace(string(old), *block, Block(*command, m, all))
	if err != nil {
		return fmt.Errorf("%s: %w", *page, err)
	}
	if err := os.WriteFile(*page, []byte(out), 0o644); err != nil {
		return err
	}
	fmt.Printf("perfpage: %s: block %s, %d results\n", *page, *block, len(all.Results))
	return nil
}

func readRun(name string) (Run, error) {
	f, err := os.Open(name)
	if err != nil {
		return Run{}, err
	}
	defer f.Close()
	r, err := Parse(f)
	if err != nil {
		return Run{}, fmt.Errorf("%s: %w", name, err)
	}
	return r, nil
}

// thisMachine reads the facts the page states from Linux's files; a fact
// it cannot read is stated as unknown.
func thisMachine(now time.Time) Machine {
	m := Machine{Date: now.UTC().Format("2006-01-02"), Cores: runtime.NumCPU(), OS: "unknown", LoadEnd: "unknown"}
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		m.CPU = field(string(b), "model name", ":")
	}
	if b, err := os.ReadFile("/proc/meminfo"); err == nil {
		var kib int
		fmt.Sscanf(strings.TrimSpace(field(string(b), "MemTotal", ":")), "%d", &kib)
		m.MemoryGiB = (kib + 1<<19) >> 20
	}
	if b, err := os.ReadFile("/etc/os-release"); err == nil {
		if v := strings.Trim(field(string(b), "PRETTY_NAME", "="), `"`); v != "" {
			m.OS = v
		}
	}
	if b, err := os.ReadFile("/proc/loadavg"); err == nil {
		if f := strings.Fields(string(b)); len(f) > 0 {
			m.LoadEnd = f[0]
		}
	}
	return m
}

// field returns the value of the first line "key<sep>value" of s.
func field(s, key, sep string) string {
	for _, line := range strings.Split(s, "\n") {
		k, v, ok := strings.Cut(line, sep)
		if ok && strings.TrimSpace(k) == key {
			return strings.TrimSpace(v)
		}
	}
	return ""
}
