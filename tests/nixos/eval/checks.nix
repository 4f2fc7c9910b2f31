# Checks of nixos-module/ that need only nixpkgs' lib: the units and files
# it generates, its assertions, and its option types. Evaluates to a
# summary string, or throws naming every failed check.
{ lib, pkgs, eval }:

let
  host = modules: (eval modules).config;

  # failedAssertions lists the messages of the assertions that fail.
  failedAssertions = cfg: map (a: a.message) (lib.filter (a: !a.assertion) cfg.assertions);

  # evalFails is true when forcing f's result throws (a type error).
  evalFails = f: !(builtins.tryEval (builtins.deepSeq (f null) true)).success;

  anyContains = needle: lib.any (lib.hasInfix needle);

  cp1 = host [{
    networking.hostName = "cp-1";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      bootstrap = true;
      openFirewall = true;
      settings.etcd.peerURL = "http://10.0.0.1:2380";
      settings.etcd.clientURL = "http://10.0.0.1:2379";
    };
  }];
  cp1Agent = cp1.systemd.services.nico-agent.serviceConfig;
  cp1Yaml = cp1.services.nico.settings;
  cp1Etcd = cp1.systemd.services.etcd;
  agentYamlFile = lib.last (lib.splitString " " cp1Agent.ExecStart);

  worker = host [{
    networking.hostName = "w-1";
    services.nico = {
      enable = true;
      seeds = [ "10.0.0.1" "10.0.0.2:7946" ];
      tokenFile = "/run/keys/nico-token";
      settings.etcd.endpoints = [ "http://10.0.0.1:2379" ];
    };
  }];

  hv = host [{
    networking.hostName = "hv-1";
    services.nico = { enable = true; roles = [ "worker" "hypervisor" ]; seeds = [ "10.0.0.1" ]; };
  }];

  disabled = host [{ services.etcd.enable = false; }];

  checks = {
    "ExecStart runs the package's agent on the rendered YAML" =
      cp1Agent.ExecStart == "${pkgs.nico}/bin/nico-agent --config /nix/store/00000000000000000000000000000000-nico-agent.yaml";
    "agent unit is Type=notify with a watchdog, after network-online" =
      cp1Agent.Type == "notify" && cp1Agent.WatchdogSec == "30s"
      && lib.elem "network-online.target" cp1.systemd.services.nico-agent.after
      && lib.elem "network-online.target" cp1.systemd.services.nico-agent.wants;
    "agent stops before etcd at shutdown" = lib.elem "etcd.service" cp1.systemd.services.nico-agent.after;
    "agent is not restarted by a switch (it runs the switch)" =
      !cp1.systemd.services.nico-agent.restartIfChanged;
    "removed node is not restarted (exit 3)" = cp1Agent.RestartPreventExitStatus == "3";
    "YAML: roles, bootstrap, name from the host name" =
      cp1Yaml.roles == [ "controlPlane" ] && cp1Yaml.bootstrap && cp1Yaml.name == "cp-1";
    "YAML: systemd runtime on etcd.service with the environment file" =
      cp1Yaml.etcd.runtime == "systemd" && cp1Yaml.etcd.unit == "etcd.service"
      && cp1Yaml.etcd.environmentFile == "/run/nico/etcd.env" && cp1Yaml.etcd.dataDir == "/var/lib/etcd";
    "YAML file holds the settings, and /etc/nico/agent.yaml links it" =
      builtins.fromJSON cp1.environment.etc."nico/agent.yaml".source.text == {
        name = "cp-1";
        roles = [ "controlPlane" ];
        bootstrap = true;
        dataDir = "/var/lib/nico";
        etcd = {
          peerURL = "http://10.0.0.1:2380";
          clientURL = "http://10.0.0.1:2379";
          endpoints = [ ];
          clusterToken = "nico";
          runtime = "systemd";
          unit = "etcd.service";
          environmentFile = "/run/nico/etcd.env";
          dataDir = "/var/lib/etcd";
        };
        log.level = "info";
      }
      && lib.hasSuffix "nico-agent.yaml" agentYamlFile;
    "etcd reads the agent's environment file and is not started at boot" =
      cp1Etcd.serviceConfig.EnvironmentFile == "-/run/nico/etcd.env"
      && cp1Etcd.wantedBy == [ ] && !cp1Etcd.restartIfChanged && cp1Etcd.serviceConfig.Restart == "no";
    "etcd keeps nixpkgs' unit (notify, etcd user)" =
      cp1Etcd.serviceConfig.Type == "notify" && cp1Etcd.serviceConfig.User == "etcd";
    "etcd URLs from the settings, loopback client URL kept" =
      cp1.services.etcd.listenPeerUrls == [ "http://10.0.0.1:2380" ]
      && cp1.services.etcd.listenClientUrls == [ "http://10.0.0.1:2379" "http://127.0.0.1:2379" ]
      && cp1.services.etcd.advertiseClientUrls == [ "http://10.0.0.1:2379" ]
      && cp1.services.etcd.name == "cp-1" && cp1.services.etcd.initialClusterToken == "nico";
    "etcd data dir recreated for the etcd user before start" =
      lib.hasInfix "install -d -m 0700 -o etcd -g etcd /var/lib/etcd" cp1Etcd.serviceConfig.ExecStartPre;
    "coordinator on the control plane, on the local client URL" =
      cp1.systemd.services ? nico-coordinator
      && cp1.services.nico.coordinator.settings.etcd.endpoints == [ "http://10.0.0.1:2379" ]
      && lib.hasPrefix "${pkgs.nico}/bin/nico-coordinator --config /nix/store/" cp1.systemd.services.nico-coordinator.serviceConfig.ExecStart;
    "firewall: gossip, etcd peer and client ports" =
      cp1.networking.firewall.allowedTCPPorts == [ 7946 2380 2379 ] && cp1.networking.firewall.allowedUDPPorts == [ 7946 ];
    "firewall: a gossip.port given as a string" =
      (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; openFirewall = true; settings.gossip.port = "7000"; }; }]).networking.firewall.allowedUDPPorts == [ 7000 ];
    "bootstrap host passes its assertions" = failedAssertions cp1 == [ ];

    "worker: no etcd, no coordinator, no firewall" =
      !worker.services.etcd.enable && !(worker.systemd.services ? nico-coordinator)
      && worker.networking.firewall.allowedTCPPorts == [ ] && !(worker.services.nico.settings.etcd ? runtime);
    "worker: seeds and tokenFile rendered to gossip.seeds and tokenFile" =
      worker.services.nico.settings.gossip.seeds == [ "10.0.0.1" "10.0.0.2:7946" ]
      && worker.services.nico.settings.tokenFile == "/run/keys/nico-token";
    "worker passes its assertions" = failedAssertions worker == [ ];

    "hypervisor: libvirtd enabled, agent needs it" =
      hv.virtualisation.libvirtd.enable && lib.elem "libvirtd.service" hv.systemd.services.nico-agent.requires
      && hv.systemd.services.nico-agent.serviceConfig.SupplementaryGroups == [ "libvirtd" ];

    "disabled module sets nothing" = !(disabled.systemd.services ? nico-agent) && disabled.assertions == [ ];

    "assertion: bootstrap without the control-plane role" =
      anyContains "needs services.nico.roles to include \"controlPlane\""
        (failedAssertions (host [{ services.nico = { enable = true; roles = [ "worker" ]; bootstrap = true; }; }]));
    "assertion: no seeds and not bootstrap" =
      anyContains "services.nico.seeds is empty"
        (failedAssertions (host [{ services.nico.enable = true; }]));
    "assertion: seeds without a token file" =
      anyContains "tokenFile is not"
        (failedAssertions (host [{ services.nico = { enable = true; seeds = [ "10.0.0.1" ]; }; }]));
    "assertion: token file in the Nix store (a Nix path)" =
      anyContains "in the Nix store, or a Nix path"
        (failedAssertions (host [{ services.nico = { enable = true; seeds = [ "a" ]; tokenFile = ./checks.nix; }; }]));
    "assertion: token file in the Nix store (a store path string)" =
      anyContains "in the Nix store, or a Nix path"
        (failedAssertions (host [{ services.nico = { enable = true; seeds = [ "a" ]; tokenFile = "${builtins.storeDir}/abc-token"; }; }]));
    "assertion: inline token in settings" =
      anyContains "holds a secret"
        (failedAssertions (host [{ services.nico = { enable = true; seeds = [ "a" ]; settings.token = "s3cret"; }; }]));

    "type error: unknown role" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "master" ]; }; }]).services.nico.roles);
    "type error: bad log level" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; settings.log.level = "loud"; }; }]).services.nico.settings.log.level);
    "type error: peer URL without a scheme" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; settings.etcd.peerURL = "10.0.0.1:2380"; }; }]).services.etcd.listenPeerUrls);
    "type error: a function in the freeform settings" =
      evalFails (_: (host [{ services.nico = { enable = true; seeds = [ "a" ]; settings.foo = x: x; }; }]).services.nico.settings);
  };

  failed = lib.attrNames (lib.filterAttrs (_: ok: !ok) checks);
in
if failed == [ ] then "${toString (lib.length (lib.attrNames checks))} module checks passed"
else throw "nixos-module checks failed:\n  ${lib.concatStringsSep "\n  " failed}"
