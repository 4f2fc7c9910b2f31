package main

import (
	"os"
	"path/filepath"
	"reflect"
	"regexp"
	"strings"
	"testing"
)

// TestParse: every result line of two packages, named without the
// GOMAXPROCS suffix, with the benchmark's own figures only (Go's ns/op
// where it reported none); b.Log lines and headers are not results.
func TestParse(t *testing.T) {
	f, err := os.Open("testdata/scale-bench.txt")
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	run, err := Parse(f)
	if err != nil {
		t.Fatal(err)
	}
	want := Run{CPU: "Intel(R) Xeon(R) Processor", Results: []Result{
		{"github.com/homystack/nico/tests/scale", "BenchmarkFleet/N=100", []Figure{{"s/register-all", "2.100"}, {"machines/s", "47.62"}, {"coord-cpu-ms/idle-min", "16.00"}}},
		{"github.com/homystack/nico/tests/scale", "BenchmarkFleet/N=1000", []Figure{{"s/register-all", "21.30"}, {"rollout/ideal", "1.210"}}},
		{"github.com/homystack/nico/tests/meshscale", "BenchmarkMesh", []Figure{{"converge-300-ms", "4210"}}},
		{"github.com/homystack/nico/tests/meshscale", "BenchmarkPlain", []Figure{{"ns/op", "1234"}, {"B/op", "56"}, {"allocs/op", "2"}}},
	}}
	if !reflect.DeepEqual(run, want) {
		t.Fatalf("Parse:\n got %+v\nwant %+v", run, want)
	}
}

// TestParseRefuses: output of a run that failed, or with no result, or a
// result line whose figures do not read, gives no figures.
func TestParseRefuses(t *testing.T) {
	for name, out := range map[string]string{
		"benchmark failed": "pkg: p\nBenchmarkA-2 1 5 x-ms\n--- FAIL: BenchmarkB\n    b_test.go:3: boom\nFAIL\n",
		"package failed":   "pkg: p\nBenchmarkA-2 1 5 x-ms\nFAIL\tgithub.com/homystack/nico/tests/bench\t3.1s\n",
		"panic":            "pkg: p\nBenchmarkA-2 1 5 x-ms\npanic: runtime error\n",
		"no result":        "goos: linux\nPASS\nok  \tp\t0.1s\n",
		"odd figures":      "pkg: p\nBenchmarkA-2 1 5 x-ms 7\n",
		"not a number":     "pkg: p\nBenchmarkA-2 1 five x-ms\n",
	} {
		if run, err := Parse(strings.NewReader(out)); err == nil {
			t.Errorf("%s: Parse = %+v, nil; want an error", name, run)
		}
	}
}

// TestBlock: the command, date, machine and loads, then a row per figure;
// rows name their package when the run holds several.
func TestBlock(t *testing.T) {
	m := Machine{Date: "2026-12-05", Cores: 2, MemoryGiB: 24, OS: "Debian GNU/Linux 12 (bookworm)", LoadStart: "0.40", LoadEnd: "1.90"}
	run := Run{CPU: "Xeon", Results: []Result{
		{"x/tests/scale", "BenchmarkFleet/N=100", []Figure{{"s/register-all", "2.100"}}},
		{"x/tests/meshscale", "BenchmarkMesh", []Figure{{"converge-300-ms", "4210"}}},
	}}
	want := "Measured by `make bench-scale` on 2026-12-05: 2 cores (Xeon), 24 GiB, Debian GNU/Linux 12 (bookworm); load average 0.40 before the run, 1.90 after.\n\n" +
		"| benchmark | figure | value |\n| --- | --- | ---: |\n" +
		"| scale: Fleet/N=100 | s/register-all | 2.100 |\n" +
		"| meshscale: Mesh | converge-300-ms | 4210 |\n"
	if got := Block("make bench-scale", m, run); got != want {
		t.Fatalf("Block:\n%s\nwant:\n%s", got, want)
	}
	run.Results = run.Results[:1]
	if got := Block("make bench-scale", m, run); !strings.Contains(got, "| Fleet/N=100 |") {
		t.Fatalf("Block of one package names it:\n%s", got)
	}
}

// TestReplace: the block between its markers is replaced, the rest of the
// page kept; a page without the markers, with them twice or out of order
// is refused.
func TestReplace(t *testing.T) {
	page := "# P\n\nprose\n" + begin("bench") + "\nold figures\n" + end("bench") + "\nmore prose\n"
	got, err := Replace(page, "bench", "new figures\n")
	if err != nil {
		t.Fatal(err)
	}
	want := "# P\n\nprose\n" + begin("bench") + "\nnew figures\n" + end("bench") + "\nmore prose\n"
	if got != want {
		t.Fatalf("Replace:\n%s\nwant:\n%s", got, want)
	}
	if again, _ := Replace(got, "bench", "new figures\n"); again != got {
		t.Fatalf("Replace twice changed the page:\n%s", again)
	}
	for name, p := range map[string]string{
		"unmarked": "# P\n" + begin("kube") + "\n" + end("kube") + "\n",
		"twice":    page + begin("bench") + "\n" + end("bench") + "\n",
		"reversed": end("bench") + "\n" + begin("bench") + "\n",
	} {
		if _, err := Replace(p, "bench", "x\n"); err == nil {
			t.Errorf("%s: Replace = nil error; want one", name)
		}
	}
}

// TestRunWritesThePageOrLeavesIt: a good output is written into the page;
// a failed run's output, a missing block or a missing flag leave the page
// as it was and return an error.
func TestRunWritesThePageOrLeavesIt(t *testing.T) {
	dir := t.TempDir()
	page := filepath.Join(dir, "performance.md")
	orig := "# Performance\n" + begin("bench-scale") + "\n" + end("bench-scale") + "\n"
	if err := os.WriteFile(page, []byte(orig), 0o644); err != nil {
		t.Fatal(err)
	}
	failed := filepath.Join(dir, "failed.out")
	if err := os.WriteFile(failed, []byte("pkg: p\nBenchmarkA-2 1 5 x-ms\n--- FAIL: BenchmarkB\nFAIL\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for name, args := range map[string][]string{
		"failed run":    {"-page", page, "-block", "bench-scale", "-command", "make bench-scale", failed},
		"unknown block": {"-page", page, "-block", "bench", "-command", "make bench", "testdata/scale-bench.txt"},
		"no command":    {"-page", page, "-block", "bench-scale", "testdata/scale-bench.txt"},
		"no output":     {"-page", page, "-block", "bench-scale", "-command", "make bench-scale"},
		"missing file":  {"-page", page, "-block", "bench-scale", "-command", "make bench-scale", filepath.Join(dir, "none.out")},
	} {
		if err := run(args); err == nil {
			t.Errorf("%s: run = nil; want an error", name)
		}
		if b, _ := os.ReadFile(page); string(b) != orig {
			t.Fatalf("%s: the page changed:\n%s", name, b)
		}
	}
	if err := run([]string{"-page", page, "-block", "bench-scale", "-command", "make bench-scale", "-load-start", "0.50", "testdata/scale-bench.txt"}); err != nil {
		t.Fatal(err)
	}
	b, _ := os.ReadFile(page)
	for _, want := range []string{"Measured by `make bench-scale` on ", "load average 0.50 before the run", "| scale: Fleet/N=1000 | rollout/ideal | 1.210 |", "| meshscale: Plain | allocs/op | 2 |"} {
		if !strings.Contains(string(b), want) {
			t.Errorf("the page lacks %q:\n%s", want, b)
		}
	}
}

// TestThePageMarksTheMakefilesBlocks: every block a make target writes is
// marked in docs/performance.md, so a long benchmark run does not end in
// an error at its last step.
func TestThePageMarksTheMakefilesBlocks(t *testing.T) {
	mk, err := os.ReadFile("../../Makefile")
	if err != nil {
		t.Fatal(err)
	}
	page, err := os.ReadFile("../../docs/performance.md")
	if err != nil {
		t.Fatal(err)
	}
	blocks := regexp.MustCompile(`\$\(PERFPAGE\) -block (\S+)`).FindAllSubmatch(mk, -1)
	if len(blocks) < 3 {
		t.Fatalf("the Makefile names %d blocks; want those of make bench, bench-scale and e2e-kube", len(blocks))
	}
	for _, b := range blocks {
		if _, err := Replace(string(page), string(b[1]), "x\n"); err != nil {
			t.Errorf("docs/performance.md: %v", err)
		}
	}
}
