#!/usr/bin/env bash
# Installs what make e2e-vm needs beyond make test's .ci/deps.sh, without
# recommends, when run as root and when something is missing: a libvirtd
# with qemu (software emulation is enough), its network's dnsmasq, qemu-img,
# a Debian kernel for the guest and a static busybox for its initramfs.
set -euo pipefail
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need libvirtd libvirt-daemon-system
need virtlogd libvirt-daemon-system
need virsh libvirt-clients
need qemu-system-x86_64 qemu-system-x86
need qemu-img qemu-utils
need dnsmasq dnsmasq-base
need unshare util-linux
need ip iproute2
need iptables iptables
# busybox-static, not busybox: the initramfs has no libc
{ [ -x /bin/busybox ] && ! ldd /bin/busybox >/dev/null 2>&1; } || pkgs+=(busybox-static)
compgen -G '/boot/vmlinuz-*' >/dev/null || pkgs+=(linux-image-amd64)
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "e2e-vm deps: installing ${pkgs[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${pkgs[@]}" >/dev/null
  else
    echo "e2e-vm deps: missing ${pkgs[*]}; run as root or install them" >&2
    exit 1
  fi
fi
