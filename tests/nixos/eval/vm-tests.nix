# Evaluates the VM tests' node configurations (tests/nixos/*.nix) with
# nixpkgs' lib alone, against the stubs: every node, and every
# specialisation of one, must evaluate with nico's module and pass its
# assertions; each test must have the nodes and script runNixOSTest takes.
# The VMs themselves need nixpkgs and KVM (nix flake check).
#
# `checks` is a summary string (or throws naming what failed); `configs`
# holds the agent and coordinator YAML of every node running nico, for
# tests/nixos/loadconfig (pkg/config must accept them).
{ lib }:

let
  e = import ./. { inherit lib; };
  flake = import ../../../flake.nix;
  self = flake.outputs { inherit self; nixpkgs = { inherit lib; }; } // { outPath = toString ../../..; };
  suites = import ../. { inherit self; pkgs = e.pkgs // { inherit lib; }; };
  tests = lib.mapAttrs (_: v: v.test) (suites.checks // suites.optional);

  failedAssertions = cfg: map (a: a.message) (lib.filter (a: !a.assertion) cfg.assertions);

  # evalTest evaluates every node of test as the test driver would name and
  # address it, each specialisation inheriting its parent's configuration.
  evalTest = test:
    let
      names = lib.attrNames test.nodes;
      index = n: lib.lists.findFirstIndex (x: x == n) null names;
      modulesOf = n: [
        test.nodes.${n}
        {
          networking.hostName = n;
          # As nixos/lib/testing/network.nix: eth1 on the test network
          # (eth0 is QEMU's user-mode NIC, with DHCP).
          networking.primaryIPAddress = "192.168.1.${toString (index n + 1)}";
          networking.interfaces.eth1.ipv4.addresses = [{ address = "192.168.1.${toString (index n + 1)}"; prefixLength = 24; }];
          _module.args.nodes = nodes;
        }
        # The flake's module defaults the package to its own build.
        ({ config, ... }: {
          services.nico.package = lib.mkForce (if lib.elem "hypervisor" config.services.nico.roles then e.pkgs.nico-hypervisor else e.pkgs.nico);
        })
      ];
      nodes = lib.mapAttrs (n: _: (e.eval (modulesOf n)).config) test.nodes;
      specialisations = lib.mapAttrs (n: cfg:
        lib.mapAttrs (_: s: (e.eval (modulesOf n ++ [ s.configuration ])).config) cfg.specialisation) nodes;
    in
    { inherit nodes specialisations; };

  evaluated = lib.mapAttrs (_: evalTest) tests;

  # Every configuration of every test: "test/node" and "test/node/spec".
  all = lib.concatMapAttrs (tn: ev:
    lib.mapAttrs' (n: cfg: lib.nameValuePair "${tn}/${n}" cfg) ev.nodes
    // lib.concatMapAttrs (n: specs: lib.mapAttrs' (s: cfg: lib.nameValuePair "${tn}/${n}/${s}" cfg) specs) ev.specialisations)
    evaluated;
  withNico = lib.filterAttrs (_: cfg: cfg.services.nico.enable) all;

  rollout = evaluated.vm-rollout-halts;
  etcText = cfg: f: if cfg.environment.etc ? ${f} && cfg.environment.etc.${f}.enable then cfg.environment.etc.${f}.text else null;
  hv = evaluated.vm-hypervisor.nodes.hv;

  checks = {
    "the scripts make nix-check lints without lib are the tests' own" =
      import ./scripts.nix == lib.mapAttrs (_: t: { script = t.testScript; nodes = lib.attrNames t.nodes; }) tests;
    "runNixOSTest gets name, nodes and a script from every test" =
      lib.all (t: lib.isString t.name && t.nodes != { } && lib.isString t.testScript) (lib.attrValues tests);
    "checks hold tests 1 to 4; the hypervisor test is optional" =
      lib.attrNames suites.checks == [ "vm-bootstrap" "vm-removal-and-leader-crash" "vm-rollout-halts" "vm-self-join" ]
      && lib.attrNames suites.optional == [ "vm-hypervisor" ];
    "every node and specialisation passes nico's assertions" =
      lib.all (cfg: failedAssertions cfg == [ ]) (lib.attrValues all);
    "self-join: cp2 boots without nico, its specialisation has it" =
      !evaluated.vm-self-join.nodes.cp2.services.nico.enable
      && evaluated.vm-self-join.specialisations.cp2.nico.services.nico.enable;
    "rollout: every node applies with the exec applier and checks the app" =
      lib.all (n: n.services.nico.settings.generations.applier == "exec"
        && n.services.nico.settings.generations.httpChecks == [ "http://127.0.0.1:8080/healthz" ])
        (lib.attrValues rollout.nodes);
    "rollout: v2 is healthy on w1 and cp1, not on w2; v1 everywhere at boot" =
      lib.all (n: etcText rollout.nodes.${n} "nico-vm-app/version" == "v1\n" && etcText rollout.nodes.${n} "nico-vm-app/healthz" != null) [ "cp1" "w1" "w2" ]
      && lib.all (n: etcText rollout.specialisations.${n}.v2 "nico-vm-app/version" == "v2\n") [ "cp1" "w1" "w2" ]
      && etcText rollout.specialisations.w1.v2 "nico-vm-app/healthz" != null
      && etcText rollout.specialisations.cp1.v2 "nico-vm-app/healthz" != null
      && etcText rollout.specialisations.w2.v2 "nico-vm-app/healthz" == null;
    "rollout: workers seed from cp1 and have no etcd" =
      rollout.nodes.w1.services.nico.seeds == [ "192.168.1.1" ] && !rollout.nodes.w1.services.etcd.enable;
    "hypervisor: hv is control plane and hypervisor with its storage pool" =
      hv.services.nico.roles == [ "controlPlane" "hypervisor" ] && hv.virtualisation.libvirtd.enable
      && hv.systemd.services ? nico-libvirt-pools && hv.virtualisation.memorySize == 2048
      && hv.services.nico.package.withLibvirt;
    "control-plane nodes give the scripts' etcdctl and nicoctl the local member" =
      lib.all (cfg: cfg.environment.variables.ETCDCTL_ENDPOINTS == "https://127.0.0.1:2379" && cfg.environment.variables.NICO_ENDPOINTS == "https://127.0.0.1:2379")
        (lib.filter (cfg: lib.elem "controlPlane" cfg.services.nico.roles) (lib.attrValues withNico));
    "every node advertises its test-network address on gossip, not QEMU's shared 10.0.2.15" =
      lib.all (cfg: cfg.services.nico.settings.gossip.advertise == cfg.networking.primaryIPAddress
        && cfg.services.nico.settings.gossip.advertise != "10.0.2.15") (lib.attrValues withNico);
    "control-plane nodes open etcd and the join port" =
      lib.all (cfg: lib.all (p: lib.elem p cfg.networking.firewall.allowedTCPPorts) [ 2379 2380 7950 7946 ])
        (lib.filter (cfg: lib.elem "controlPlane" cfg.services.nico.roles) (lib.attrValues withNico));
  };
  failed = lib.attrNames (lib.filterAttrs (_: ok: !ok) checks);
in
{
  checks =
    if failed == [ ] then "${toString (lib.length (lib.attrNames checks))} VM test node checks passed (${toString (lib.length (lib.attrNames all))} configurations)"
    else throw "VM test node checks failed:\n  ${lib.concatStringsSep "\n  " failed}";

  # Besides the VM tests' nodes, hosts that use the keys the tests do not:
  # etcd with TLS and a pki.dir, gossip and join settings, a hypervisor with
  # labels, the nixos applier with health checks.
  configs = lib.mapAttrs (_: cfg: {
    agent = cfg.environment.etc."nico/agent.yaml".source.text;
    coordinator = if cfg.environment.etc ? "nico/coordinator.yaml" then cfg.environment.etc."nico/coordinator.yaml".source.text else null;
    # nicoctl's settings in a shell on the host.
    nicoctlEnv = cfg.environment.variables;
  }) (withNico // lib.mapAttrs (n: m: (e.eval [ { networking.hostName = lib.last (lib.splitString "/" n); } m ]).config) {
    "module/tls" = {
      services.nico = {
        enable = true;
        roles = [ "controlPlane" ];
        bootstrap = true;
        settings = {
          etcd.peerURL = "https://10.0.0.1:2380";
          etcd.clientURL = "https://10.0.0.1:2379";
          pki.dir = "/srv/nico-pki";
          pki.caCertFile = "/run/keys/ca.crt";
          pki.caKeyFile = "/run/keys/ca.key";
          join.listen = "10.0.0.1:7950";
          gossip = { port = "7000"; advertise = "10.0.0.1"; profile = "wan"; };
          log.level = "debug";
        };
      };
    };
    "module/hypervisor" = {
      services.nico = {
        enable = true;
        roles = [ "worker" "hypervisor" ];
        seeds = [ "10.0.0.1" "10.0.0.2:7946" ];
        tokenFile = "/run/keys/nico-token";
        hypervisor.storagePools.default = "/var/lib/libvirt/images";
        settings.hypervisor = { uri = "qemu:///system"; labels = [ "rack=a" "gpu=true" ]; };
        settings.join.endpoints = [ "10.0.0.1:7950" ];
      };
    };
    # Nothing but what a worker must set: every typed key at its default,
    # which must be the agent's own (tests/nixos/loadconfig compares them).
    "defaults/w1" = {
      services.nico = { enable = true; seeds = [ "10.0.0.1" ]; tokenFile = "/run/keys/nico-token"; };
    };
    "module/nixos-applier" = {
      services.nico = {
        enable = true;
        seeds = [ "10.0.0.1" ];
        tokenFile = "/run/keys/nico-token";
        settings.generations = {
          applier = "nixos";
          healthDeadline = "90s";
          checkCommands = [ "systemctl is-active --quiet nginx.service" ];
          httpChecks = [ "http://127.0.0.1:80/healthz" ];
          allowFailedUnits = [ "user@*.service" ];
        };
      };
    };
  });
}
