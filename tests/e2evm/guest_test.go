package e2evm

import (
	"bufio"
	"compress/gzip"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// guestModules are the kernel modules the guest loads for its virtio NIC and
// RNG (Debian builds them as modules); their dependencies come along.
var guestModules = []string{"virtio_pci", "virtio_net", "virtio_rng"}

// guestInit is the initramfs's /init: mount the pseudo file systems, load
// the NIC's modules, get an address by DHCP, and run nico-agent, which takes
// its name, roles, gossip seeds and token from the SMBIOS OEM strings
// (/sys/firmware/dmi/entries/11-*/raw: there is no systemd to import them
// as credentials). The agent is restarted when it fails, as systemd would;
// when it was removed from the cluster (exit 3) the guest powers off.
const guestInit = `#!/bin/busybox sh
/bin/busybox --install -s /bin
export PATH=/bin
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /run
mount -t tmpfs tmpfs /tmp
for m in %s; do insmod /lib/modules/$m.ko || echo "init: insmod $m failed"; done
ip link set lo up
for i in $(seq 100); do [ -e /sys/class/net/eth0 ] && break; sleep 0.1; done
ip link set eth0 up
until udhcpc -i eth0 -s /etc/udhcpc.sh -t 10 -T 2 -n -q; do echo "init: no DHCP lease yet"; done
while :; do
  echo "init: starting nico-agent"
  /bin/nico-agent --dataDir /var/lib/nico
  rc=$?
  echo "init: nico-agent exited with $rc"
  [ "$rc" = 3 ] && break
  sleep 2
done
poweroff -f
`

// udhcpcScript configures the lease udhcpc got.
const udhcpcScript = `#!/bin/sh
case "$1" in
bound|renew)
  ifconfig "$interface" "$ip" netmask "${subnet:-255.255.255.0}"
  [ -n "$router" ] && route add default gw "${router%% *}" dev "$interface"
  echo "udhcpc: $interface $ip"
  ;;
esac
`

// buildGuest writes the guest's initramfs (busybox, the static agent, the
// NIC's modules, /init) into dir and returns it with the host's Debian
// kernel image, whose modules it took.
func buildGuest(t *testing.T, dir, agentBin string) (kernel, initrd string) {
	t.Helper()
	kernels, _ := filepath.Glob("/boot/vmlinuz-*")
	if len(kernels) == 0 {
		t.Fatal("no /boot/vmlinuz-*: install linux-image-amd64 (tests/e2evm/deps.sh)")
	}
	slices.Sort(kernels)
	kernel = kernels[len(kernels)-1]
	kver := strings.TrimPrefix(filepath.Base(kernel), "vmlinuz-")
	modDir := filepath.Join("/lib/modules", kver)
	order, err := moduleOrder(filepath.Join(modDir, "modules.dep"), guestModules)
	if err != nil {
		t.Fatal(err)
	}
	files := map[string]cpioEntry{}
	for _, d := range []string{"bin", "dev", "etc", "lib", "lib/modules", "proc", "run", "sys", "tmp", "var", "var/lib"} {
		files[d] = cpioEntry{Mode: cpioDir | 0o755}
	}
	add := func(name, src string, mode uint32) {
		b, err := os.ReadFile(src)
		if err != nil {
			t.Fatal(err)
		}
		files[name] = cpioEntry{Mode: cpioFile | mode, Data: b}
	}
	add("bin/busybox", "/bin/busybox", 0o755)
	add("bin/nico-agent", agentBin, 0o755)
	var names []string
	for _, rel := range order {
		name := strings.TrimSuffix(filepath.Base(rel), ".ko")
		add("lib/modules/"+name+".ko", filepath.Join(modDir, rel), 0o644)
		names = append(names, name)
	}
	files["init"] = cpioEntry{Mode: cpioFile | 0o755, Data: fmt.Appendf(nil, guestInit, strings.Join(names, " "))}
	files["etc/udhcpc.sh"] = cpioEntry{Mode: cpioFile | 0o755, Data: []byte(udhcpcScript)}

	initrd = filepath.Join(dir, "initrd.img")
	f, err := os.Create(initrd)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zw, _ := gzip.NewWriterLevel(f, gzip.BestSpeed)
	if err := writeCpio(zw, files); err != nil {
		t.Fatal(err)
	}
	if err := zw.Close(); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return kernel, initrd
}

// moduleOrder reads modules.dep and returns the modules named (by their
// name without .ko) with their dependencies, each after what it needs, as
// paths relative to the modules directory.
func moduleOrder(depFile string, want []string) ([]string, error) {
	f, err := os.Open(depFile)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	deps := map[string][]string{}
	byName := map[string]string{}
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		mod, rest, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		deps[mod] = strings.Fields(rest)
		byName[modName(mod)] = mod
	}
	if err := sc.Err(); err != nil {
		return nil, err
	}
	var out []string
	seen := map[string]bool{}
	var visit func(mod string)
	visit = func(mod string) {
		if seen[mod] {
			return
		}
		seen[mod] = true
		for _, d := range deps[mod] {
			visit(d)
		}
		out = append(out, mod)
	}
	for _, w := range want {
		mod, ok := byName[modName(w)]
		if !ok {
			return nil, fmt.Errorf("module %s is not in %s", w, depFile)
		}
		visit(mod)
	}
	return out, nil
}

// modName is a module's name from its file: '-' and '_' are the same to
// the kernel (virtio-rng.ko is virtio_rng).
func modName(path string) string {
	return strings.ReplaceAll(strings.TrimSuffix(filepath.Base(path), ".ko"), "-", "_")
}

func TestModuleOrder(t *testing.T) {
	dep := filepath.Join(t.TempDir(), "modules.dep")
	if err := os.WriteFile(dep, []byte("kernel/a/net.ko: kernel/b/fo.ko kernel/c/ring.ko\nkernel/b/fo.ko:\nkernel/c/ring.ko:\nkernel/a/pci.ko: kernel/c/ring.ko\nkernel/d/hw-rng.ko: kernel/c/ring.ko\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	got, err := moduleOrder(dep, []string{"pci", "net", "hw_rng"})
	if want := []string{"kernel/c/ring.ko", "kernel/a/pci.ko", "kernel/b/fo.ko", "kernel/a/net.ko", "kernel/d/hw-rng.ko"}; err != nil || !slices.Equal(got, want) {
		t.Fatalf("order %v %v, want %v", got, err, want)
	}
	if _, err := moduleOrder(dep, []string{"nope"}); err == nil {
		t.Fatal("unknown module accepted")
	}
}
