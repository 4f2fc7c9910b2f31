# The hosts of the real-systemd tier (tests/systemd): three control-plane
# hosts on one bridge, cp1 the bootstrap host and the seed of the others,
# set up as a user would (tests/nixos/lib.nix does the same for the VMs).
# The addresses are the guests' own (each in its own network namespace).
{ lib }:

let
  ip = n: "10.233.0.${toString n}";
  controlPlane = n: { address = ip n; module = controlPlaneModule n; };
  controlPlaneModule = n: {
    networking.hostName = "cp${toString n}";
    # A test token; on real hosts it is a secret outside the store.
    environment.etc."nico-token".text = "sdtier.0123456789abcdef";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      bootstrap = n == 1;
      seeds = lib.optional (n != 1) (ip 1);
      tokenFile = "/etc/nico-token";
      settings.etcd = {
        peerURL = "https://${ip n}:2380";
        clientURL = "https://${ip n}:2379";
        endpoints = lib.optional (n != 1) "https://${ip 1}:2379";
      };
      settings.heartbeat.ttl = "5s";
      settings.gossip.profile = "fast";
      # Generations run a script the tier puts there (a simulated switch;
      # TestAgentRestartsIntoTheNewAgent); without it none is applied.
      settings.generations = {
        applier = "exec";
        command = [ "/etc/nico-test/switch" ];
        healthDeadline = "30s";
      };
    };
  };
  # A worker: no etcd member; it joins the mesh through cp1.
  worker = extra: {
    address = ip 4;
    module = {
      imports = [ extra ];
      networking.hostName = "w1";
      environment.etc."nico-token".text = "sdtier.0123456789abcdef";
      services.nico = {
        enable = true;
        roles = [ "worker" ];
        seeds = [ (ip 1) ];
        tokenFile = "/etc/nico-token";
        settings.etcd.endpoints = [ "https://${ip 1}:2379" ];
        settings.heartbeat.ttl = "5s";
        settings.gossip.profile = "fast";
      };
    };
  };
  # cp1 declaring a machine pool in the flake (services.nico.objects),
  # at three revisions; the third is refused against the cluster (an
  # external member with cp1's own peer URL). TestDeclaredObjects.
  withObjects = rev: lastModified: count: extra: {
    address = ip 1;
    module = {
      imports = [ (controlPlaneModule 1) ];
      services.nico.objects = {
        enable = true;
        revision = rev;
        inherit lastModified;
        machinePools.web = { inherit count; template = { vcpus = 1; memoryMiB = 512; diskGiB = 4; baseImage = "x.qcow2"; network = "default"; }; };
      } // extra;
    };
  };
in
{
  cp1 = controlPlane 1;
  cp2 = controlPlane 2;
  cp3 = controlPlane 3;
  # cp1 applying its generations with the `nixos` applier (fetch, nix
  # build, profile, switch-to-configuration under systemd-run, health gate,
  # rollback; TestNixOSApplier).
  cp1-nixos = {
    address = ip 1;
    module = {
      imports = [ (controlPlaneModule 1) ];
      services.nico.settings.generations.applier = lib.mkForce "nixos";
      services.nico.settings.generations.command = lib.mkForce [ ];
    };
  };
  # cp2's and cp3's next generations, like cp1-switched: the three switch
  # at once (TestParallelSwitchesTakeTheSlotOneAtATime).
  cp2-switched = { address = ip 2; module = { imports = [ (controlPlaneModule 2) ]; services.nico.settings.log.level = "debug"; }; };
  cp3-switched = { address = ip 3; module = { imports = [ (controlPlaneModule 3) ]; services.nico.settings.log.level = "debug"; }; };
  # cp2's next generation with a short switch-slot hold: its check is
  # held while cp3 joins, then granted, and the switch never happens, so
  # the leader takes the slot back at the hold (TestSwitchGuardUnderSystemd).
  cp2-hold = {
    address = ip 2;
    module = {
      imports = [ (controlPlaneModule 2) ];
      services.nico.settings.log.level = "debug";
      services.nico.switchGuard.hold = "30s";
    };
  };
  # A data-plane host and its next generation: no switch guard.
  w1 = worker { };
  w1-switched = worker { services.nico.settings.log.level = "debug"; };
  # cp1's next generation: only its settings changed (a `switch` to it
  # must reach the running agent; TestChangedSettingsReachTheAgent).
  cp1-switched = {
    address = ip 1;
    module = {
      imports = [ (controlPlaneModule 1) ];
      services.nico.settings.log.level = "debug";
    };
  };
  cp1-objects = withObjects "r1" 100 2 { };
  cp1-objects-next = withObjects "r2" 200 3 { };
  cp1-objects-bad = withObjects "r3" 300 4 {
    etcdCluster = {
      voters = 3;
      members = [{ name = "ext-1"; kind = "external"; peerURLs = [ "https://${ip 1}:2380" ]; clientURLs = [ "https://10.233.0.9:2379" ]; }];
    };
  };
}
