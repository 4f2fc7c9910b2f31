package e2evm

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/homystack/nico/pkg/api"
)

// accelProbeWithin is how long a probe guest under KVM has to print its
// kernel's banner; a working KVM does it in about a second.
const accelProbeWithin = 30 * time.Second

// kernelBanner is the kernel's first console line: a guest that printed it
// got past the firmware and the kernel's real-mode setup, which is where a
// /dev/kvm that cannot run guests (a nested kvm_pvm) stops.
const kernelBanner = "Linux version"

// guestType is the guests' domain type chosen by chooseAccel, and
// guestTypeWhy why. With auto (NICO_E2EVM_DOMAIN_TYPE=auto) the host
// chooses, and may redefine a guest that does not boot under kvm as qemu:
// the first console copied is then stale, and only the host's NotBooting
// fails the test early.
var guestType, guestTypeWhy string

// chooseAccel decides the guests' domain type: kvm when /dev/kvm exists and
// a probe guest (the guests' kernel, no initramfs, under qemu -accel kvm)
// prints the kernel's banner on its serial console within
// accelProbeWithin; else qemu, software emulation (TCG).
// NICO_E2EVM_DOMAIN_TYPE (kvm, qemu or auto) overrides it. It returns the
// type and why.
func chooseAccel(t *testing.T, w, kernel string) (domainType, why string) {
	t.Helper()
	if v := os.Getenv("NICO_E2EVM_DOMAIN_TYPE"); v != "" {
		return v, "NICO_E2EVM_DOMAIN_TYPE=" + v
	}
	if _, err := os.Stat("/dev/kvm"); err != nil {
		return "qemu", "no /dev/kvm: software emulation (TCG)"
	}
	out := filepath.Join(w, "kvm-probe.console")
	ctx, cancel := context.WithTimeout(context.Background(), accelProbeWithin)
	defer cancel()
	cmd := exec.CommandContext(ctx, "qemu-system-x86_64", "-accel", "kvm", "-m", "256", "-smp", "1",
		"-nodefaults", "-display", "none", "-no-reboot", "-serial", "file:"+out,
		"-kernel", kernel, "-append", "console=ttyS0 panic=-1")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	t0 := time.Now()
	if err := cmd.Start(); err != nil {
		return "qemu", fmt.Sprintf("/dev/kvm exists, but the KVM probe did not start (%v): software emulation (TCG)", err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	defer func() { cancel(); <-done }()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		if b, _ := os.ReadFile(out); bytes.Contains(b, []byte(kernelBanner)) {
			return "kvm", fmt.Sprintf("/dev/kvm exists and a probe guest under KVM printed its kernel banner after %v", time.Since(t0).Round(10*time.Millisecond))
		}
		select {
		case err := <-done:
			done <- err // for the deferred wait
			b, _ := os.ReadFile(out)
			if bytes.Contains(b, []byte(kernelBanner)) {
				continue
			}
			return "qemu", fmt.Sprintf("/dev/kvm exists, but qemu -accel kvm exited (%v) without the kernel's banner: %s: software emulation (TCG)", err, lastLine(stderr.Bytes()))
		case <-ctx.Done():
			b, _ := os.ReadFile(out)
			return "qemu", fmt.Sprintf("/dev/kvm exists, but a probe guest under KVM printed no kernel banner within %v (its console: %q): this KVM cannot run guests (a nested kvm_pvm?); software emulation (TCG)", accelProbeWithin, lastLine(b))
		case <-tick.C:
		}
	}
}

// bootTimeout is the host's hypervisor.bootTimeout, and consoleSilence how
// long the test waits for a guest's console: a kernel with console=ttyS0
// writes kilobytes within seconds, even under software emulation.
const (
	bootTimeout    = 2 * time.Minute
	consoleSilence = bootTimeout + 30*time.Second // the host's NotBooting first
)

// notBooting fails the test at once when the host reports that m's guest
// does not boot (Booted false, NotBooting), with the host's message.
func notBooting(t *testing.T, m *api.Machine) {
	t.Helper()
	if c := api.FindCondition(m.Status.Conditions, api.CondBooted); c != nil && !c.Status && c.Reason == "NotBooting" {
		t.Fatalf("%s does not boot, says its host: %s (the test chose domain type %s: %s)", m.Metadata.Name, c.Message, guestType, guestTypeWhy)
	}
}

// silentConsole fails the test at once when the console copied to path
// since since holds under 1 KiB after consoleSilence: the guest did not get
// as far as its kernel.
func silentConsole(t *testing.T, path, name string, since time.Time) {
	t.Helper()
	if time.Since(since) < consoleSilence {
		return
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return // the console could not be copied: the host's NotBooting tells
	}
	if len(b) < 1024 {
		t.Fatalf("%s's console is silent: %d bytes in %v (%q); its guest does not boot under domain type %s (%s)", name, len(b), consoleSilence, lastLine(b), guestType, guestTypeWhy)
	}
}

// lastLine is the last non-empty line of b, at most 200 bytes.
func lastLine(b []byte) string {
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	l := strings.TrimSpace(lines[len(lines)-1])
	if len(l) > 200 {
		l = l[len(l)-200:]
	}
	return l
}
