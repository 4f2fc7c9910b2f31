# Evaluates the parts of flake.nix that need no nixpkgs, with nixpkgs'
# lib standing in for the nixpkgs input (make nix-check): the overlay
# calls nixos-module/package.nix with a vendorHash, and
# nixosModules.default evaluates against the stubs.
{ lib }:

let
  flake = import ../../../flake.nix;
  self = flake.outputs { inherit self; nixpkgs = { inherit lib; }; } // { outPath = toString ../../..; };
  e = import ./. { inherit lib; };

  called = self.overlays.default { callPackage = path: args: { inherit path args; }; } { };

  host = (e.eval [
    self.nixosModules.default
    { services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; package = lib.mkForce e.pkgs.nico; }; }
  ]).config;

  # package.nix called with a buildGoModule that returns its arguments.
  pkgArgs = import ../../../nixos-module/package.nix {
    inherit lib;
    buildGoModule = args: args // { override = _: buildGoModule; };
    pkg-config = "pkg-config";
    libvirt = "libvirt";
    vendorHash = called.nico.args.vendorHash;
  };
  buildGoModule = args: args;

  checks = {
    "package: cgo on, pkg-config and libvirt for pkg/libvirt" =
      pkgArgs.env.CGO_ENABLED == "1" && pkgArgs.nativeBuildInputs == [ "pkg-config" ] && pkgArgs.buildInputs == [ "libvirt" ];
    "package: the three programs, the flake's vendorHash" =
      pkgArgs.subPackages == [ "agent/cmd/nico-agent" "coordinator/cmd/nico-coordinator" "coordinator/cmd/nicoctl" ]
      && pkgArgs.vendorHash == called.nico.args.vendorHash && pkgArgs.pname == "nico";
    "package: the source leaves out the cache, build outputs and git" =
      lib.all (n: !(pkgArgs.src.filter (toString ../../.. + "/" + n) "directory")) [ ".cache" "bin" ".git" ]
      && pkgArgs.src.filter (toString ../../../go.mod) "regular";
    "flake: inputs.nixpkgs follows nixos-unstable" = flake.inputs.nixpkgs.url == "github:NixOS/nixpkgs/nixos-unstable";
    "flake: overlay builds nixos-module/package.nix" = baseNameOf (toString called.nico.path) == "package.nix";
    "flake: vendorHash is an SRI sha256" = builtins.match "sha256-[A-Za-z0-9+/]{43}=" called.nico.args.vendorHash != null;
    "flake: nixosModules.default is the module" = host.systemd.services ? nico-agent && host.services.etcd.enable;
  };
  failed = lib.attrNames (lib.filterAttrs (_: ok: !ok) checks);
in
if failed == [ ] then "${toString (lib.length (lib.attrNames checks))} flake checks passed"
else throw "flake checks failed:\n  ${lib.concatStringsSep "\n  " failed}"
