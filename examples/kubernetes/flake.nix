# A Kubernetes cluster (nixpkgs' services.kubernetes) on machines nico
# manages. nico writes cluster.nix next to this file on every machine of
# the KubernetesCluster (and the join token, SSH key and certificates to
# the paths it names), then builds
# nixosConfigurations.<machine>; on release it switches to #minimal.
# See nico's docs/kubernetes-clusters.md, "cluster.nix and the example flakes".
{
  description = "Kubernetes (services.kubernetes) from nico's cluster.nix";

  inputs = {
    nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";
    nico.url = "github:homystack/nico";
    nico.inputs.nixpkgs.follows = "nixpkgs";
  };

  outputs = { nixpkgs, nico, ... }: import ./outputs.nix {
    inherit nixpkgs nico;
    clusterFile = ./cluster.nix;
  };
}
