# The flake's outputs, a function of the cluster.nix it reads (the checks
# of make nix-check call it with sample files, tests/nixos/eval/examples.nix).
{ nixpkgs, nico, clusterFile, system ? "x86_64-linux" }:
let
  inherit (nixpkgs) lib;
  # Validated against nico's schema: a cluster.nix of another schema
  # version, or with a field missing or mistyped, fails here naming it.
  cluster = nico.lib.clusterSchema.load clusterFile;
  host = name: lib.nixosSystem {
    inherit system;
    specialArgs = { inherit cluster; machine = cluster.machine name; };
    modules = [ nico.nixosModules.default ./fleet.nix ./k3s.nix { networking.hostName = name; } ];
  };
in
{
  nixosConfigurations =
    # A released machine keeps the fleet's configuration, without k3s.
    { minimal = lib.nixosSystem { inherit system; modules = [ nico.nixosModules.default ./fleet.nix ]; }; }
    # No cluster.nix (a checkout outside nico): only #minimal.
    // lib.optionalAttrs (builtins.pathExists clusterFile) (lib.genAttrs cluster.machineNames host);
}
