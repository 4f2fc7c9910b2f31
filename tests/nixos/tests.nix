# The VM tests, by the names the flake gives them: `checks` run in `nix
# flake check`, `optional` only when built by name (see default.nix).
{
  checks = {
    vm-bootstrap = ./bootstrap.nix;
    vm-self-join = ./self-join.nix;
    vm-rollout-halts = ./rollout.nix;
    vm-removal-and-leader-crash = ./removal.nix;
  };
  optional = {
    vm-hypervisor = ./hypervisor.nix;
  };
}
