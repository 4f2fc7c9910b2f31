# NixOS VM tests of the whole flow (pkgs.testers.runNixOSTest), wired into
# the flake's checks. They need KVM and nixpkgs: `nix flake check` or
# `nix build .#checks.x86_64-linux.<name>`.
{ pkgs, self }:

let
  run = test: pkgs.testers.runNixOSTest (import test { inherit self; inherit (pkgs) lib; });
in
{
  vm-bootstrap = run ./bootstrap.nix;
  vm-self-join = run ./self-join.nix;
  vm-removal-and-leader-crash = run ./removal.nix;
}
