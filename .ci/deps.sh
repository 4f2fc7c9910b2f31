#!/usr/bin/env bash
# Installs the Debian packages the Makefile's targets use (with "demo", only
# make demo's), when run as root and when one is missing. Go itself must be
# on PATH (Go 1.26).
set -euo pipefail
command -v go >/dev/null || { echo "deps: go is not on PATH; install Go 1.26 first" >&2; exit 1; }
pkgs=()
need() { command -v "$1" >/dev/null 2>&1 || pkgs+=("$2"); }
need git git
# .ci/deps.sh demo: only what make demo uses (Go and git: it builds without
# cgo; its etcd members run inside the agents), none of the test tiers' packages.
if [ "${1:-}" != demo ]; then
need gcc gcc
need ip iproute2
# iptables cuts a node off in the gossip partition test (tests/netns)
need iptables iptables
need ps procps
# the real-systemd tier (tests/systemd): Debian's systemd boots as PID 1 of
# each guest, with a socket-activated dbus-daemon; nsenter and unshare
[ -x /lib/systemd/systemd ] || pkgs+=(systemd)
need dbus-daemon dbus
need nsenter util-linux
need curl curl
# headless Chromium for the status page's browser test (coordinator/statuspage)
need chromium chromium
# Nix 2.x (no daemon) for make nix-check: parse and evaluate the NixOS module, hash the Go vendor dir;
# and for the nixos applier's real-Nix tests (pkg/apply, tests/systemd): build the test flake
need nix-instantiate nix-bin
need python3 python3
# pyflakes lints the NixOS VM tests' Python scripts as the test driver does (make nix-check)
need pyflakes3 python3-pyflakes
# mypy type-checks them against a stub of the test driver, as runNixOSTest does (make nix-check)
need mypy mypy
# the real-kubelet tests (make e2e-kube): a container runtime, its OCI
# runtime and the CNI plugins (bridge, host-local, loopback)
need containerd containerd
need runc runc
[ -x /usr/lib/cni/bridge ] || pkgs+=(containernetworking-plugins)
# libvirt's C library and headers for pkg/libvirt (cgo), found through pkg-config
need pkg-config pkg-config
pkg-config --exists libvirt 2>/dev/null || pkgs+=(libvirt-dev)
fi
if [ ${#pkgs[@]} -gt 0 ]; then
  if [ "$(id -u)" = 0 ]; then
    echo "deps: installing ${pkgs[*]}"
    apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "${pkgs[@]}" >/dev/null
  else
    echo "deps: missing ${pkgs[*]}; run as root or install them" >&2
    exit 1
  fi
fi
