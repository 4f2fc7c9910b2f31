package etcdtest

import (
	"bufio"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"testing"
)

// helperEnv makes the test binary, run again as a child, reserve ports
// and hold them until its stdin closes: "lockdir lo hi count".
const helperEnv = "NICO_PORT_HELPER"

// TestFreePortHelper is the child's body; without helperEnv it does nothing.
func TestFreePortHelper(t *testing.T) {
	spec := os.Getenv(helperEnv)
	if spec == "" {
		return
	}
	var lo, hi, n int
	var dir string
	if _, err := fmt.Sscan(spec, &dir, &lo, &hi, &n); err != nil {
		t.Fatalf("%s=%q: %v", helperEnv, spec, err)
	}
	PortLockDir, portSpan = dir, [2]int{lo, hi}
	var ports []string
	for range n {
		ports = append(ports, strconv.Itoa(FreePort(t)))
	}
	fmt.Println("ports", strings.Join(ports, " "))
	_, _ = io.Copy(io.Discard, os.Stdin) // hold them until the parent lets go
}

// TestFreePortSkipsPortsAnotherProcessHolds: a second test process (go
// test runs packages side by side) never gets a port that the first has
// handed out, even while nothing listens on it (a member between its stop
// and its restart on the same URL); once the first exits its ports are
// free again.
func TestFreePortSkipsPortsAnotherProcessHolds(t *testing.T) {
	// The span lies below lowestPort, where no FreePort of another test
	// process picks: its own lock directory lets this test take ports
	// without the machine-wide reservations, and its bind checks must not
	// land on a port another process holds between a member's stop and
	// restart.
	const lo, hi, held = lowestPort - 1000, lowestPort - 960, 20
	dir := t.TempDir()
	oldDir, oldSpan := PortLockDir, portSpan
	t.Cleanup(func() { PortLockDir, portSpan = oldDir, oldSpan })
	PortLockDir, portSpan = dir, [2]int{lo, hi}

	child := exec.Command(os.Args[0], "-test.run", "^TestFreePortHelper$")
	child.Env = append(os.Environ(), fmt.Sprintf("%s=%s %d %d %d", helperEnv, dir, lo, hi, held))
	stdin, err := child.StdinPipe()
	if err != nil {
		t.Fatal(err)
	}
	out, err := child.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := child.Start(); err != nil {
		t.Fatal(err)
	}
	childPorts := map[int]bool{}
	sc := bufio.NewScanner(out)
	for sc.Scan() {
		if rest, ok := strings.CutPrefix(sc.Text(), "ports "); ok {
			for _, f := range strings.Fields(rest) {
				p, _ := strconv.Atoi(f)
				childPorts[p] = true
			}
			break
		}
	}
	if len(childPorts) != held {
		stdin.Close()
		_ = child.Wait()
		t.Fatalf("the child reserved %d ports, want %d: %v", len(childPorts), held, childPorts)
	}
	for range hi - lo - held {
		if p := FreePort(t); childPorts[p] {
			t.Fatalf("FreePort gave %d, which the other process holds", p)
		}
	}
	stdin.Close()
	_, _ = io.Copy(io.Discard, out) // to the child's exit
	if err := child.Wait(); err != nil {
		t.Fatalf("child: %v", err)
	}
	for p := range childPorts {
		if !reservePort(p) {
			t.Fatalf("port %d still held after its process exited", p)
		}
	}
}
