# nico-agent, nico-coordinator and nicoctl, built from this repository.
# vendorHash is kept in flake.nix and computed offline by `make
# vendor-hash` (go mod vendor + nix hash path); make nix-check compares it.
{ lib, buildGoModule, go_1_26 ? null, pkg-config, libvirt, version ? "dev", vendorHash }:

# go.mod asks for Go 1.26; use it where nixpkgs has it by that name.
(if go_1_26 != null then buildGoModule.override { go = go_1_26; } else buildGoModule) {
  pname = "nico";
  inherit version vendorHash;

  # The whole repository: `go mod vendor` (and so vendorHash) covers the
  # imports of every package, tests/ included.
  src = lib.cleanSourceWith {
    src = ../.;
    filter = path: type:
      let base = baseNameOf path; in
      !(lib.elem base [ ".cache" "bin" "result" ".git" ]) && !(lib.hasSuffix ".out" base);
  };

  subPackages = [ "agent/cmd/nico-agent" "coordinator/cmd/nico-coordinator" "coordinator/cmd/nicoctl" ];
  ldflags = [ "-s" "-w" "-X main.Version=${version}" ];

  # pkg/libvirt, the binding of hypervisor hosts, is cgo (libvirt.org/go/libvirt):
  # it compiles against libvirt's headers found through pkg-config and links
  # libvirt.so. Without cgo the agent builds, but its hypervisor role
  # answers "unavailable" (pkg/libvirt/nocgo.go). nixpkgs >= 25.11 takes
  # CGO_ENABLED in env only.
  nativeBuildInputs = [ pkg-config ];
  buildInputs = [ libvirt ];
  env.CGO_ENABLED = "1";

  # The tests need etcd binaries and loopback networking: `make test`.
  doCheck = false;

  meta = {
    description = "NixOS fleet agent and coordinator that grow and shrink etcd through learners";
    homepage = "https://github.com/homystack/nico";
    mainProgram = "nico-agent";
    platforms = lib.platforms.linux;
  };
}
