# Evaluates nixos-module/ with nixpkgs' `lib` alone, against the option
# declarations in stubs.nix and the stand-in packages in pkgs.nix.
#
#   nix-instantiate --eval --strict tests/nixos/eval -A checks --arg lib 'import /path/to/nixpkgs/lib'
#   nix-instantiate --eval --raw ... -A optionsDoc   (Nix >= 2.12; make nix-docs uses --json)
{ lib }:

let
  pkgs = import ./pkgs.nix { inherit lib; };

  # eval returns the evaluated configuration of a host with `modules`.
  eval = modules: lib.evalModules {
    modules = [
      (import ./stubs.nix { inherit lib pkgs; })
      ../../../nixos-module
      { _module.args.pkgs = pkgs; }
    ] ++ modules;
  };
in
{
  inherit eval pkgs;
  checks = import ./checks.nix { inherit lib pkgs eval; };
  # Must fail to evaluate, with a message that says what to set
  # (tests/nixos/nix-check.sh reads it).
  badHostName = (eval [{
    networking.hostName = "Cp_1";
    services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; };
  }]).config.systemd.services.etcd.environment.ETCD_NAME;
  optionsDoc = import ../../../nixos-module/options-doc.nix {
    inherit lib;
    options = (eval [ ]).options.services.nico;
  };
}
