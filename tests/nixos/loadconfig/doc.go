// Package loadconfig checks that the configuration files the NixOS module
// renders for the VM tests' nodes are accepted by nico's own loaders
// (pkg/config): a key or value the module writes and the programs refuse
// fails here rather than in a VM. tests/nixos/nix-check.sh (make nix-check)
// renders them with nixpkgs' lib and runs the test with NICO_NIX_CONFIGS
// (and the manifest of declared objects with NICO_NIX_MANIFEST);
// without it the test skips.
package loadconfig
