# nico-agent, nico-coordinator and nicoctl, built from this repository.
# vendorHash is kept in flake.nix and computed offline by `make
# vendor-hash` (go mod vendor + nix hash path); make nix-check compares it.
#
# withLibvirt: pkg/libvirt, the binding of hypervisor hosts, is cgo
# (libvirt.org/go/libvirt): it compiles against libvirt's headers found
# through pkg-config and links libvirt.so. Without it (the default, the
# flake's `nico`) cgo is off, libvirt stays out of the closure, and the
# agent's hypervisor role answers "unavailable" (pkg/libvirt/nocgo.go);
# hosts with that role use `nico-hypervisor` (withLibvirt = true), which
# services.nico picks for them.
#
# go: the Go toolchain, Go >= 1.26 as go.mod asks; the overlay passes the
# one nixpkgs has (see goFor in flake.nix).
{ lib, buildGoModule, go, pkg-config, libvirt, withLibvirt ? false, version ? "dev", vendorHash }:

(buildGoModule.override { inherit go; }) {
  pname = if withLibvirt then "nico-hypervisor" else "nico";
  inherit version vendorHash;

  # The whole repository: `go mod vendor` (and so vendorHash) covers the
  # imports of every package, tests/ included.
  src = lib.cleanSourceWith {
    src = ../.;
    filter = path: type:
      let base = baseNameOf path; in
      !(lib.elem base [ ".cache" "bin" "result" ".git" ]) && !(lib.hasSuffix ".out" base);
  };

  subPackages = [ "agent/cmd/nico-agent" "agent/cmd/nico-etcd-proxy" "coordinator/cmd/nico-coordinator" "coordinator/cmd/nicoctl" ];
  ldflags = [ "-s" "-w" "-X main.Version=${version}" ];

  # nixpkgs >= 25.11 takes CGO_ENABLED in env only.
  nativeBuildInputs = lib.optionals withLibvirt [ pkg-config ];
  buildInputs = lib.optionals withLibvirt [ libvirt ];
  env.CGO_ENABLED = if withLibvirt then "1" else "0";

  # The tests need etcd binaries and loopback networking: `make test`.
  doCheck = false;

  # services.nico checks it on hypervisor hosts.
  passthru = { inherit withLibvirt; };

  meta = {
    description = "NixOS fleet agent and coordinator that grow and shrink etcd through learners"
      + lib.optionalString withLibvirt " (with libvirt, for hypervisor hosts)";
    homepage = "https://github.com/homystack/nico";
    mainProgram = "nico-agent";
    platforms = lib.platforms.linux;
  };
}
