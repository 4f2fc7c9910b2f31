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
  # A declared object of the wrong type: must fail naming the option
  # (tests/nixos/nix-check.sh reads it).
  badObject = (eval [{
    networking.hostName = "cp-1";
    services.nico = {
      enable = true; bootstrap = true; roles = [ "controlPlane" ];
      objects = { enable = true; revision = "r"; lastModified = 1; machinePools.web.count = "two"; };
    };
  }]).config.services.nico.objects.manifest.text;
  # The manifest of a fleet declared with every kind: applied by
  # tests/nixos/loadconfig (TestManifestApplies) on embedded etcd.
  fleetManifest = (eval [{
    networking.hostName = "cp-1";
    services.nico = {
      enable = true; bootstrap = true; roles = [ "controlPlane" ];
      objects = {
        enable = true;
        revision = "abc123";
        lastModified = 1700000000;
        etcdCluster = { voters = 3; policy = { replaceDeadMembersAfter = "10m"; defragFragmentation = 0.5; }; snapshots = { interval = "1h"; destination = "/mnt/etcd-snapshots"; }; };
        machinePools.web = { count = 2; spread = true; template = { vcpus = 1; memoryMiB = 512; diskGiB = 4; baseImage = "x.qcow2"; network = "default"; }; };
        kubernetesClusters.prod = {
          gitRepo = "https://example.org/fleet.git";
          configurationSubdir = "k3s";
          controlPlane.machines = [ "cp-1" ];
          dataPlane = { machineSelector.matchLabels.role = "worker"; count = 2; };
        };
      };
    };
  }]).config.services.nico.objects.manifest.text;
  optionsDoc = import ../../../nixos-module/options-doc.nix {
    inherit lib;
    options = (eval [ ]).options.services.nico;
  };
}
