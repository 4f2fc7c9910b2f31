# NixOS VM tests of the whole flow (pkgs.testers.runNixOSTest). They need
# KVM and nixpkgs: `nix flake check`, or one of them with
# `nix build .#checks.x86_64-linux.<name>`.
#
# `checks` are wired into the flake's checks. `optional` holds the tests
# that need more than a plain KVM host (nested virtualisation); they are
# not in `nix flake check` and are run on purpose:
# `nix build .#vmTests.vm-hypervisor` (the flake's legacyPackages; see
# hypervisor.nix).
{ pkgs, self }:

let
  run = test: pkgs.testers.runNixOSTest (import test { inherit self; inherit (pkgs) lib; });
  tests = import ./tests.nix;
in
{
  checks = builtins.mapAttrs (_: run) tests.checks;
  optional = builtins.mapAttrs (_: run) tests.optional;
}
