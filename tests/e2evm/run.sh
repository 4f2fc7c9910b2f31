#!/usr/bin/env bash
# make e2e-vm: boots a real VM with a real libvirtd and qemu, and checks that
# it joins the cluster by itself (TestGuestJoins in this directory).
#
#   host (root)            network namespace nico-e2evm-PID, private mounts
#   -----------            --------------------------------------------------
#   deps, go build   --->  /etc/libvirt, /var/lib/libvirt, /run/libvirt, ... bound
#   ip netns add           to copies under $W; virtlogd -d, libvirtd -d;
#                          e2evm.test: network "nico" (10.77.0.1/24, dnsmasq),
#                          nico-agent (bootstrap etcd + hypervisor) and
#                          nico-coordinator on 10.77.0.1, a MachinePool whose
#                          guest boots a Debian kernel + busybox initramfs
#                          with a static nico-agent
#
# Nothing leaves the namespace: the libvirt network is isolated (no forward)
# and every address is 127.0.0.1 or 10.77.0.0/24. Needs root. The guests
# are domain type kvm when /dev/kvm exists (made group kvm, 0660, as there
# is no udev) and a probe guest under qemu -accel kvm prints its kernel's
# banner within 30 s (accel_test.go; a nested kvm_pvm's does not), else
# qemu emulates (domain type qemu, TCG); the test logs which and why, and
# fails at once when a guest's console stays silent or its host reports it
# NotBooting. NICO_E2EVM_DOMAIN_TYPE=kvm|qemu skips the probe. Set
# NICO_E2EVM_KEEP=1 to keep $W.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" = inside ]; then
  W=$2
  # Private copies of libvirt's state: nothing of the host's libvirt is
  # touched, and all of it goes with the mount namespace.
  for d in /etc/libvirt /var/lib/libvirt /var/log/libvirt /var/cache/libvirt /run/libvirt; do
    mkdir -p "$d" "$W/root$d"
    [ "$d" = /run/libvirt ] || cp -a "$d/." "$W/root$d/"
    mount --bind "$W/root$d" "$d"
  done
  rm -f /etc/libvirt/qemu/networks/autostart/*.xml /etc/libvirt/qemu/*.xml
  # No systemd, cgroup delegation, AppArmor or udev here: qemu runs as root
  # in the namespace, without cgroups or its own mount namespace.
  cat >>/etc/libvirt/qemu.conf <<'CONF'
user = "root"
group = "root"
dynamic_ownership = 0
remember_owner = 0
security_driver = "none"
cgroup_controllers = [ ]
namespaces = [ ]
CONF
  virtlogd -d -p "$W/virtlogd.pid"
  libvirtd -d -p "$W/libvirtd.pid"
  for _ in $(seq 100); do [ -S /run/libvirt/libvirt-sock ] && break; sleep 0.1; done
  rc=0
  NICO_E2EVM_DIR=$W "$W/e2evm.test" -test.v -test.count=1 -test.timeout 75m ${NICO_E2EVM_RUN:+-test.run "$NICO_E2EVM_RUN"} || rc=$?
  kill "$(cat "$W/libvirtd.pid")" "$(cat "$W/virtlogd.pid")" 2>/dev/null || true
  exit $rc
fi

[ "$(id -u)" = 0 ] || { echo "e2e-vm: needs root (network namespace, libvirtd)" >&2; exit 2; }
tests/e2evm/deps.sh
if [ -e /dev/kvm ]; then
  getent group kvm >/dev/null || groupadd -r kvm
  chgrp kvm /dev/kvm && chmod 660 /dev/kvm
fi
W=$(mktemp -d /tmp/nico-e2evm.XXXXXX)
chmod 755 "$W"
echo "e2e-vm: building into $W"
go test -c -o "$W/e2evm.test" ./tests/e2evm
go build -o "$W/nico-agent" ./agent/cmd/nico-agent
go build -o "$W/nico-coordinator" ./coordinator/cmd/nico-coordinator
# The guest's agent: static (no cgo, so no libvirt), for an initramfs without libc.
CGO_ENABLED=0 go build -o "$W/guest-agent" ./agent/cmd/nico-agent

NS=nico-e2evm-$$
ip netns add "$NS"
cleanup() {
  # Whatever still runs in the namespace is ours (qemu, dnsmasq, daemons).
  pids=$(ip netns pids "$NS" 2>/dev/null || true)
  [ -z "$pids" ] || { kill $pids 2>/dev/null || true; sleep 1; kill -9 $pids 2>/dev/null || true; }
  ip netns del "$NS" 2>/dev/null || true
  [ -n "${NICO_E2EVM_KEEP:-}" ] && echo "e2e-vm: kept $W" || rm -rf "$W"
}
trap cleanup EXIT
ip -n "$NS" link set lo up
ip netns exec "$NS" unshare --mount --propagation private "$0" inside "$W"
