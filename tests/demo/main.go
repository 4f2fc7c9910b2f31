// Command demo shows nico's main job on one machine: a bootstrap agent with a
// coordinator, then four more agents as separate processes on loopback that
// join through learners, one at a time, until there are five voters; then
// two nodes are removed, the etcd leader among them, leaving three voters.
// Every process and temporary directory is cleaned up; it exits non-zero if
// any step fails or the whole run takes longer than its deadline.
//
// With -keep-running (make demo KEEP=1) it leaves the cluster running at
// the end, printing the nicoctl command line to reach it, until Ctrl-C or
// SIGTERM.
//
// Usage: go run ./tests/demo -bin bin [-keep-running]
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"syscall"
	"time"
)

func main() {
	bin := flag.String("bin", "bin", "directory with nico-agent, nico-coordinator and nicoctl")
	deadline := flag.Duration("deadline", 2*time.Minute, "fail if the demo takes longer")
	keep := flag.Bool("keep", false, "keep the temporary directory (logs, data) for inspection")
	keepRunning := flag.Bool("keep-running", false, "leave the cluster running after the demo until Ctrl-C or SIGTERM, printing the nicoctl command line to reach it (make demo KEEP=1)")
	flag.Parse()
	signals, stop := signal.NotifyContext(context.Background(), syscall.SIGINT, syscall.SIGTERM)
	defer stop()
	ctx, cancel := context.WithTimeout(signals, *deadline)
	defer cancel()
	var stay context.Context // nil: stop when the demo ends
	if *keepRunning {
		stay = signals
	}
	start := time.Now()
	d, err := newDemo(*bin, *keep)
	if err == nil {
		err = d.run(ctx, stay)
		if cerr := d.cleanup(); cerr != nil {
			err = errors.Join(err, cerr)
		}
	}
	if err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			err = fmt.Errorf("demo did not finish within %s: %w", *deadline, err)
		}
		fmt.Fprintf(os.Stderr, "\ndemo FAILED after %s: %v\n", time.Since(start).Round(100*time.Millisecond), err)
		os.Exit(1)
	}
	fmt.Printf("\ndemo finished in %s; every process stopped and every temporary directory removed\n", time.Since(start).Round(100*time.Millisecond))
}
