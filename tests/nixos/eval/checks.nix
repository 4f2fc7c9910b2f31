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

  # coordYaml is the coordinator's rendered configuration (the file its
  # ExecStart names, linked to /etc/nico/coordinator.yaml).
  coordYaml = cfg: builtins.fromJSON cfg.environment.etc."nico/coordinator.yaml".source.text;

  cp1 = host [{
    networking.hostName = "cp-1";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      bootstrap = true;
      openFirewall = true;
      settings.etcd.peerURL = "https://10.0.0.1:2380";
      settings.etcd.clientURL = "https://10.0.0.1:2379";
    };
  }];
  cp1Agent = cp1.systemd.services.nico-agent.serviceConfig;
  cp1Yaml = cp1.services.nico.settings;
  cp1Etcd = cp1.systemd.services.etcd;
  agentYamlFile = cp1.environment.etc."nico/agent.yaml".source.name;

  worker = host [{
    networking.hostName = "w-1";
    services.nico = {
      enable = true;
      seeds = [ "10.0.0.1" "10.0.0.2:7946" ];
      tokenFile = "/run/keys/nico-token";
      settings.etcd.endpoints = [ "https://10.0.0.1:2379" ];
    };
  }];

  # A control-plane host that joins through seeds: its coordinator learns
  # the etcd endpoints from its own member of the mesh.
  cp2 = host [{
    networking.hostName = "cp-2";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      seeds = [ "10.0.0.1" ];
      tokenFile = "/run/keys/nico-token";
      openFirewall = true;
      settings.etcd.peerURL = "https://10.0.0.2:2380";
      settings.etcd.clientURL = "https://10.0.0.2:2379";
      settings.gossip.advertise = "10.0.0.2";
    };
  }];
  cp2Coord = cp2.systemd.services.nico-coordinator.serviceConfig;

  hv = host [{
    networking.hostName = "hv-1";
    services.nico = { enable = true; roles = [ "worker" "hypervisor" ]; seeds = [ "10.0.0.1" ]; };
  }];

  disabled = host [{ services.etcd.enable = false; }];

  # etcd with TLS (https URLs): the agent's certificates from pki.dir.
  tls = host [{
    networking.hostName = "cp-t";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      bootstrap = true;
      openFirewall = true;
      settings = {
        etcd.peerURL = "https://10.0.0.1:2380";
        etcd.clientURL = "https://10.0.0.1:2379";
        pki.dir = "/var/lib/nico-pki";
        join.listen = "10.0.0.1:7999";
        gossip = { port = "7000"; advertise = "10.0.0.1"; profile = "wan"; };
      };
    };
  }];
  tlsEtcd = tls.services.etcd;
  tlsEnv = tls.systemd.services.etcd.environment;

  nixosApplier = host [{
    services.nico = {
      enable = true;
      seeds = [ "10.0.0.1" ];
      tokenFile = "/run/keys/t";
      settings.generations = { applier = "nixos"; healthDeadline = "90s"; httpChecks = [ "http://127.0.0.1:80/" ]; };
    };
  }];

  hvPools = host [{
    services.nico = {
      enable = true;
      roles = [ "hypervisor" ];
      seeds = [ "10.0.0.1" ];
      tokenFile = "/run/keys/t";
      hypervisor.storagePools = { default = "/var/lib/libvirt/images"; "nico pool" = "/srv/vms"; };
      settings.hypervisor = { uri = "qemu+ssh://h/system"; labels = [ "rack=a" ]; domainType = "qemu"; };
    };
  }];
  hvPoolsScript = hvPools.systemd.services.nico-libvirt-pools.serviceConfig.ExecStart.text;

  # A minimal valid host with extra settings, for assertions and type errors.
  cpWith = extra: host [{ services.nico = lib.recursiveUpdate { enable = true; bootstrap = true; roles = [ "controlPlane" ]; } extra; }];

  checks = {
    "ExecStart runs the package's agent on /etc/nico/agent.yaml, the current generation's file" =
      cp1Agent.ExecStart == "${pkgs.nico}/bin/nico-agent --config /etc/nico/agent.yaml"
      && cp1.environment.etc."nico/agent.yaml".source.outPath == "/nix/store/00000000000000000000000000000000-nico-agent.yaml";
    "agent unit is Type=notify with a watchdog, after network-online" =
      cp1Agent.Type == "notify" && cp1Agent.WatchdogSec == "30s"
      && lib.elem "network-online.target" cp1.systemd.services.nico-agent.after
      && lib.elem "network-online.target" cp1.systemd.services.nico-agent.wants;
    "agent stops before etcd at shutdown" = lib.elem "etcd.service" cp1.systemd.services.nico-agent.after;
    "agent is not restarted by a switch (it runs the switch)" =
      !cp1.systemd.services.nico-agent.restartIfChanged;
    "removed node is not restarted (exit 3)" = cp1Agent.RestartPreventExitStatus == "3";
    "an agent a generation replaced restarts into the new one (exit 4, /etc/nico/agent-path)" =
      cp1Agent.RestartForceExitStatus == "4" && cp1Agent.SuccessExitStatus == "4"
      && cp1.environment.etc."nico/agent-path".text == "${pkgs.nico}/bin/nico-agent\n"
      && cp1Yaml.generations.agentPathFile == "/etc/nico/agent-path";
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
        labels = [ ];
        etcd = {
          peerURL = "https://10.0.0.1:2380";
          clientURL = "https://10.0.0.1:2379";
          endpoints = [ ];
          clusterToken = "nico";
          runtime = "systemd";
          unit = "etcd.service";
          binary = "${pkgs.etcd}/bin/etcd";
          environmentFile = "/run/nico/etcd.env";
          dataDir = "/var/lib/etcd";
        };
        log.level = "info";
        gossip = { port = 7946; profile = "lan"; };
        join = { listen = ":7950"; endpoints = [ ]; };
        recovery.listen = ":7951";
        generations = { applier = "none"; command = [ ]; healthDeadline = "2m"; checkCommands = [ ]; httpChecks = [ ]; allowFailedUnits = [ ]; agentPathFile = "/etc/nico/agent-path"; };
        hypervisor = { uri = "qemu:///system"; labels = [ ]; domainType = "auto"; };
        metrics.listen = "127.0.0.1:9479";
      }
      && lib.hasSuffix "nico-agent.yaml" agentYamlFile;
    "etcd reads the agent's environment file and is not started at boot" =
      cp1Etcd.serviceConfig.EnvironmentFile == "-/run/nico/etcd.env"
      && cp1Etcd.wantedBy == [ ] && !cp1Etcd.restartIfChanged && cp1Etcd.serviceConfig.Restart == "no";
    "etcd keeps nixpkgs' unit (notify, etcd user)" =
      cp1Etcd.serviceConfig.Type == "notify" && cp1Etcd.serviceConfig.User == "etcd";
    "etcd URLs from the settings, loopback client URL kept" =
      cp1.services.etcd.listenPeerUrls == [ "https://10.0.0.1:2380" ]
      && cp1.services.etcd.listenClientUrls == [ "https://10.0.0.1:2379" "https://127.0.0.1:2379" ]
      && cp1.services.etcd.advertiseClientUrls == [ "https://10.0.0.1:2379" ]
      && cp1.services.etcd.name == "cp-1" && cp1.services.etcd.initialClusterToken == "nico";
    "etcd data dir recreated for the etcd user before start" =
      lib.elem "+${pkgs.coreutils}/bin/install -d -m 0700 -o etcd -g etcd /var/lib/etcd" cp1Etcd.serviceConfig.ExecStartPre;
    "coordinator on the control plane, on the local client URL" =
      cp1.systemd.services ? nico-coordinator
      && cp1.services.nico.coordinator.settings.etcd.endpoints == [ "https://10.0.0.1:2379" ]
      && cp1.systemd.services.nico-coordinator.serviceConfig.ExecStart
        == "${pkgs.nico}/bin/nico-coordinator --config ${cp1.environment.etc."nico/coordinator.yaml".source}";
    "firewall: gossip, etcd peer and client ports, join endpoint, recovery API" =
      cp1.networking.firewall.allowedTCPPorts == [ 7946 2380 2379 7950 7951 ] && cp1.networking.firewall.allowedUDPPorts == [ 7946 ];
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

    "agent: sh on its PATH (checkCommands), not nix or git without the nixos applier" =
      lib.elem pkgs.bash cp1.systemd.services.nico-agent.path && !(lib.elem pkgs.git cp1.systemd.services.nico-agent.path);
    "agent: nix and git on its PATH with the nixos applier" =
      lib.elem pkgs.nix nixosApplier.systemd.services.nico-agent.path && lib.elem pkgs.git nixosApplier.systemd.services.nico-agent.path;
    "YAML: generations keys rendered" =
      nixosApplier.services.nico.settings.generations.applier == "nixos"
      && nixosApplier.services.nico.settings.generations.healthDeadline == "90s"
      && (builtins.fromJSON nixosApplier.environment.etc."nico/agent.yaml".source.text).generations.httpChecks == [ "http://127.0.0.1:80/" ];
    "nicoctl and the agent installed for operators" = lib.elem pkgs.nico cp1.environment.systemPackages;

    "TLS (defect 2): services.etcd names etcd's own copies in /run/etcd-pki, with client and peer cert auth" =
      tlsEtcd.certFile == "/run/etcd-pki/etcd-server.crt"
      && tlsEtcd.keyFile == "/run/etcd-pki/etcd-server.key"
      && tlsEtcd.trustedCaFile == "/run/etcd-pki/ca.crt"
      && tlsEtcd.peerCertFile == "/run/etcd-pki/etcd-peer.crt"
      && tlsEtcd.peerKeyFile == "/run/etcd-pki/etcd-peer.key"
      && tlsEtcd.peerTrustedCaFile == "/run/etcd-pki/ca.crt"
      && tlsEtcd.clientCertAuth && tlsEtcd.peerClientCertAuth;
    "TLS (defect 1): root copies those five files from pki.dir into etcd's runtime directory, with no bind over pki.dir" =
      lib.sort (a: b: a < b) tls.systemd.services.etcd.serviceConfig.ExecStartPre == [
        "+${pkgs.coreutils}/bin/chown -R etcd:etcd /var/lib/etcd"
        "+${pkgs.coreutils}/bin/install -d -m 0700 -o etcd -g etcd /var/lib/etcd"
        "+${pkgs.coreutils}/bin/install -m 0400 -o etcd -g etcd /var/lib/nico-pki/ca.crt /var/lib/nico-pki/etcd-server.crt /var/lib/nico-pki/etcd-server.key /var/lib/nico-pki/etcd-peer.crt /var/lib/nico-pki/etcd-peer.key /run/etcd-pki/"
      ]
      && tls.systemd.services.etcd.serviceConfig.RuntimeDirectory == "etcd-pki"
      && tls.systemd.services.etcd.serviceConfig.RuntimeDirectoryMode or null == "0700"
      && !(tls.systemd.services.etcd.serviceConfig ? BindReadOnlyPaths)
      && !(cp1Etcd.serviceConfig ? BindReadOnlyPaths);
    "the agent's state directory (pki.dir's parent) stays 0700" =
      cp1Agent.StateDirectory == "nico" && cp1Agent.StateDirectoryMode == "0700";
    "TLS: etcd's environment names the files and requires client certificates" =
      tlsEnv.ETCD_CERT_FILE == "/run/etcd-pki/etcd-server.crt"
      && tlsEnv.ETCD_PEER_TRUSTED_CA_FILE == "/run/etcd-pki/ca.crt"
      && tlsEnv.ETCD_CLIENT_CERT_AUTH == "1" && tlsEnv.ETCD_PEER_CLIENT_CERT_AUTH == "1";
    "TLS: pki.dir defaults to <dataDir>/pki" =
      lib.any (lib.hasInfix "/var/lib/nico/pki/etcd-server.crt /var/lib/nico/pki/etcd-server.key")
        (cpWith { settings.etcd = { peerURL = "https://10.0.0.1:2380"; clientURL = "https://10.0.0.1:2379"; }; }).systemd.services.etcd.serviceConfig.ExecStartPre;
    "nicoctl and etcdctl in a shell: the local member; with TLS root's certificate from pki.dir" =
      cp1.environment.variables.NICO_ENDPOINTS == "https://127.0.0.1:2379"
      && cp1.environment.variables.ETCDCTL_CERT == "/var/lib/nico/pki/root.crt"
      && tls.environment.variables == {
        NICO_ENDPOINTS = "https://127.0.0.1:2379";
        NICO_TLS_CAFILE = "/var/lib/nico-pki/ca.crt";
        NICO_TLS_CERTFILE = "/var/lib/nico-pki/root.crt";
        NICO_TLS_KEYFILE = "/var/lib/nico-pki/root.key";
        NICO_SECRETS_KEYFILE = "/var/lib/nico-pki/secrets.key";
        ETCDCTL_ENDPOINTS = "https://127.0.0.1:2379";
        ETCDCTL_CACERT = "/var/lib/nico-pki/ca.crt";
        ETCDCTL_CERT = "/var/lib/nico-pki/root.crt";
        ETCDCTL_KEY = "/var/lib/nico-pki/root.key";
      }
      && worker.environment.variables == { };
    "TLS: the loopback client URL is https too" =
      tlsEtcd.listenClientUrls == [ "https://10.0.0.1:2379" "https://127.0.0.1:2379" ];
    "TLS (coordinator waits): no credentials, which would fail its start on a host that joins; root without capabilities, read-only file system" =
      let c = tls.systemd.services.nico-coordinator.serviceConfig; in
      !(c ? LoadCredential) && !(c ? DynamicUser) && c.User == "root" && c.CapabilityBoundingSet == ""
      && c.ProtectSystem == "strict" && c.NoNewPrivileges && c.ProtectHome && !(c ? ReadWritePaths) && !(c ? StateDirectory);
    "coordinator: of /var/lib only pki.dir (and tokenFile), read-only; tmpfiles makes pki.dir 0700 before the agent runs" =
      let c = tls.systemd.services.nico-coordinator.serviceConfig; in
      c.TemporaryFileSystem == "/var/lib:ro" && c.BindReadOnlyPaths == [ "/var/lib/nico-pki" ]
      && tls.systemd.tmpfiles.rules == [ "d /var/lib/nico-pki 0700 root root -" ]
      && cp2Coord.BindReadOnlyPaths == [ "/var/lib/nico/pki" "-/run/keys/nico-token" ]
      && cp2.systemd.tmpfiles.rules == [ "d /var/lib/nico 0700 root root -" "d /var/lib/nico/pki 0700 root root -" ]
      && worker.systemd.tmpfiles.rules == [ ];
    "TLS: the coordinator's YAML points tls.* at pki.dir, its name is the machine's" =
      coordYaml tls == {
        name = "cp-t";
        etcd.endpoints = [ "https://10.0.0.1:2379" ];
        metrics.listen = "127.0.0.1:9480";
        statusPage.listen = "127.0.0.1:9490";
        tls = {
          caFile = "/var/lib/nico-pki/ca.crt";
          certFile = "/var/lib/nico-pki/coordinator.crt";
          keyFile = "/var/lib/nico-pki/coordinator.key";
        };
      };
    "TLS by default: the default pki.dir's files, client cert auth, the coordinator's in pki.dir" =
      cp1.services.etcd.certFile == "/run/etcd-pki/etcd-server.crt" && cp1.services.etcd.clientCertAuth
      && lib.any (lib.hasInfix "/var/lib/nico/pki/ca.crt") cp1Etcd.serviceConfig.ExecStartPre
      && (coordYaml cp1).tls.certFile == "/var/lib/nico/pki/coordinator.crt";
    "coordinator waits (start timeout): beyond the default, extended by the program while it waits" =
      cp1.systemd.services.nico-coordinator.serviceConfig.TimeoutStartSec == "2min"
      && cp1.systemd.services.nico-coordinator.serviceConfig.Type == "notify";
    "coordinator on a host that joins: no etcd.endpoints, the mesh through the agent's seeds and token" =
      coordYaml cp2 == {
        name = "cp-2";
        etcd.endpoints = [ ];
        metrics.listen = "127.0.0.1:9480";
        statusPage.listen = "127.0.0.1:9490";
        gossip = { seeds = [ "10.0.0.1" ]; profile = "lan"; advertise = "10.0.0.2"; };
        tokenFile = "/run/keys/nico-token";
        tls = {
          caFile = "/var/lib/nico/pki/ca.crt";
          certFile = "/var/lib/nico/pki/coordinator.crt";
          keyFile = "/var/lib/nico/pki/coordinator.key";
        };
      }
      && !(coordYaml cp1) ? gossip && !(coordYaml cp1) ? tokenFile;
    "coordinator on a host that joins: netlink for its advertise address, its gossip port open" =
      lib.elem "AF_NETLINK" cp2Coord.RestrictAddressFamilies
      && !(lib.elem "AF_NETLINK" cp1.systemd.services.nico-coordinator.serviceConfig.RestrictAddressFamilies)
      && cp2.networking.firewall.allowedTCPPorts == [ 7946 2380 2379 7950 7951 7947 ]
      && cp2.networking.firewall.allowedUDPPorts == [ 7946 7947 ];
    "joining control-plane host passes its assertions" = failedAssertions cp2 == [ ];
    "gossip: a port given as a string, advertise and profile rendered" =
      tls.services.nico.settings.gossip == { port = 7000; advertise = "10.0.0.1"; profile = "wan"; };
    "firewall: the join port from join.listen, the gossip port from settings" =
      tls.networking.firewall.allowedTCPPorts == [ 7000 2380 2379 7999 7951 ] && tls.networking.firewall.allowedUDPPorts == [ 7000 ];
    "firewall: no recovery port when recovery.listen is empty" =
      (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; openFirewall = true; settings.recovery.listen = ""; }; }]).networking.firewall.allowedTCPPorts == [ 7946 2380 2379 7950 ];
    "firewall: no join port on a worker" =
      (host [{ services.nico = { enable = true; seeds = [ "a" ]; tokenFile = "/t"; openFirewall = true; }; }]).networking.firewall.allowedTCPPorts == [ 7946 ];
    "YAML: pki.dir and gossip.advertise left out when null" =
      !(builtins.fromJSON cp1.environment.etc."nico/agent.yaml".source.text ? pki)
      && !((builtins.fromJSON cp1.environment.etc."nico/agent.yaml".source.text).gossip ? advertise);

    "hypervisor: storage pools defined, started and autostarted before the agent" =
      lib.elem "nico-libvirt-pools.service" hvPools.systemd.services.nico-agent.after
      && lib.elem "nico-libvirt-pools.service" hvPools.systemd.services.nico-agent.wants
      && hvPools.systemd.services.nico-libvirt-pools.serviceConfig.Type == "oneshot"
      && lib.hasInfix "virsh -c qemu+ssh://h/system" hvPoolsScript
      && lib.hasInfix "pool-define-as default dir --target /var/lib/libvirt/images" hvPoolsScript
      && lib.hasInfix "pool-define-as 'nico pool' dir --target /srv/vms" hvPoolsScript
      && lib.hasInfix "pool-autostart 'nico pool'" hvPoolsScript;
    "hypervisor: uri, labels and domainType rendered" =
      (builtins.fromJSON hvPools.environment.etc."nico/agent.yaml".source.text).hypervisor == { uri = "qemu+ssh://h/system"; labels = [ "rack=a" ]; domainType = "qemu"; };
    "hypervisor: no pools unit without pools" = !(hv.systemd.services ? nico-libvirt-pools);

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

    "assertion: CA key file in the Nix store" =
      anyContains "pki.caKeyFile (/nix/store/x-ca.key) is in the Nix store"
        (failedAssertions (cpWith { settings.pki = { caCertFile = "/etc/ca.crt"; caKeyFile = "/nix/store/x-ca.key"; }; }));
    "assertion: CA certificate without its key" =
      anyContains "pki.caCertFile and pki.caKeyFile go together"
        (failedAssertions (cpWith { settings.pki.caCertFile = "/etc/ca.crt"; }));
    "assertion: an http etcd URL" =
      anyContains "must both be https: etcd runs with mutual TLS only"
        (failedAssertions (cpWith { settings.etcd = { peerURL = "https://10.0.0.1:2380"; clientURL = "http://10.0.0.1:2379"; }; }));
    "assertion: exec applier without a command" =
      anyContains "generations.command is empty"
        (failedAssertions (cpWith { settings.generations.applier = "exec"; }));
    "assertion: storage pools without the hypervisor role" =
      anyContains "storagePools is set but services.nico.roles does not include \"hypervisor\""
        (failedAssertions (cpWith { hypervisor.storagePools.default = "/var/lib/libvirt/images"; }));
    "assertion: an http etcd endpoint" =
      anyContains "endpoints (http://10.0.0.2:2379) must all be https"
        (failedAssertions (cpWith { settings.etcd.endpoints = [ "http://10.0.0.2:2379" ]; }));
    "assertion: the hypervisor role with a package built without libvirt" =
      anyContains "is built without libvirt"
        (failedAssertions (host [{ services.nico = { enable = true; roles = [ "hypervisor" ]; seeds = [ "a" ]; tokenFile = "/t"; package = pkgs.nico; }; }]));
    "assertion: the agent's metrics beyond loopback without TLS" =
      anyContains "services.nico.settings.metrics.listen (0.0.0.0:9479) is not a loopback address"
        (failedAssertions (cpWith { settings.metrics.listen = "0.0.0.0:9479"; }));
    "assertion: the agent's metrics key in the Nix store" =
      anyContains "services.nico.settings.metrics.tls.keyFile (/nix/store/x-m.key) is in the Nix store"
        (failedAssertions (cpWith { settings.metrics.tls.keyFile = "/nix/store/x-m.key"; }));
    "assertion: the coordinator's metrics on every address without TLS" =
      anyContains "services.nico.coordinator.settings.metrics.listen (:9480) is not a loopback address"
        (failedAssertions (cpWith { coordinator.settings.metrics.listen = ":9480"; }));
    "assertion: the coordinator's metrics key in the Nix store" =
      anyContains "services.nico.coordinator.settings.metrics.tls.keyFile (/nix/store/x-c.key) is in the Nix store"
        (failedAssertions (cpWith { coordinator.settings.metrics.tls.keyFile = "/nix/store/x-c.key"; }));
    "assertion: the status page beyond loopback without TLS" =
      anyContains "services.nico.coordinator.settings.statusPage.listen (10.0.0.1:9490) is not a loopback address"
        (failedAssertions (cpWith { coordinator.settings.statusPage.listen = "10.0.0.1:9490"; }));
    "assertion: the status page key in the Nix store" =
      anyContains "services.nico.coordinator.settings.statusPage.tls.keyFile (/nix/store/x-s.key) is in the Nix store"
        (failedAssertions (cpWith { coordinator.settings.statusPage.tls.keyFile = "/nix/store/x-s.key"; }));
    "metrics and status page: loopback, [::1] and localhost need no TLS; beyond loopback with the three files passes; empty serves nothing" =
      failedAssertions (cpWith { settings.metrics.listen = "[::1]:9479"; coordinator.settings.metrics.listen = "localhost:9480"; coordinator.settings.statusPage.listen = ""; }) == [ ]
      && failedAssertions (cpWith { settings.metrics = { listen = "10.0.0.1:9479"; tls = { certFile = "/var/lib/nico/m.crt"; keyFile = "/var/lib/nico/m.key"; clientCAFile = "/var/lib/nico/pki/ca.crt"; }; }; }) == [ ];
    "YAML: metrics.tls.* and statusPage.tls.* rendered when set, left out when null" =
      let
        h = cpWith {
          settings.metrics = { listen = "10.0.0.1:9479"; tls = { certFile = "/m.crt"; keyFile = "/m.key"; clientCAFile = "/ca.crt"; }; };
          coordinator.settings.statusPage = { listen = "10.0.0.1:9490"; tls = { certFile = "/s.crt"; keyFile = "/s.key"; clientCAFile = "/ca.crt"; }; };
        };
      in
      (builtins.fromJSON h.environment.etc."nico/agent.yaml".source.text).metrics == { listen = "10.0.0.1:9479"; tls = { certFile = "/m.crt"; keyFile = "/m.key"; clientCAFile = "/ca.crt"; }; }
      && (coordYaml h).statusPage == { listen = "10.0.0.1:9490"; tls = { certFile = "/s.crt"; keyFile = "/s.key"; clientCAFile = "/ca.crt"; }; }
      && (coordYaml h).metrics == { listen = "127.0.0.1:9480"; };
    "type error: metrics.listen without a port" =
      evalFails (_: (cpWith { settings.metrics.listen = "10.0.0.1"; }).services.nico.settings.metrics.listen);
    "YAML: componentProbes.* rendered when set, left out when null" =
      let
        yaml = h: builtins.fromJSON h.environment.etc."nico/agent.yaml".source.text;
        h = cpWith { settings.componentProbes = { apiServerURL = "https://10.0.0.11:6443/readyz"; schedulerURL = "https://[::1]:10259/healthz"; }; };
      in
      (yaml h).componentProbes == { apiServerURL = "https://10.0.0.11:6443/readyz"; schedulerURL = "https://[::1]:10259/healthz"; }
      && !((yaml cp1) ? componentProbes);
    "type error: componentProbes.apiServerURL without a port" =
      evalFails (_: (cpWith { settings.componentProbes.apiServerURL = "https://10.0.0.11/readyz"; }).services.nico.settings.componentProbes.apiServerURL);
    "type error: componentProbes.schedulerURL not http" =
      evalFails (_: (cpWith { settings.componentProbes.schedulerURL = "tcp://10.0.0.11:10259"; }).services.nico.settings.componentProbes.schedulerURL);
    "YAML: drain.* and kubeconfigPublish.* rendered when set, left out when null" =
      let
        yaml = h: builtins.fromJSON h.environment.etc."nico/agent.yaml".source.text;
        h = cpWith { settings.drain = { kubeconfig = "/etc/kubernetes/drain.conf"; resync = "1m"; outputTail = 8192; }; settings.kubeconfigPublish.interval = "5s"; };
      in
      (yaml h).drain == { kubeconfig = "/etc/kubernetes/drain.conf"; resync = "1m"; outputTail = 8192; }
      && (yaml h).kubeconfigPublish == { interval = "5s"; }
      && !((yaml cp1) ? drain) && !((yaml cp1) ? kubeconfigPublish);
    "type error: drain.kubeconfig relative" =
      evalFails (_: (cpWith { settings.drain.kubeconfig = "admin.conf"; }).services.nico.settings.drain.kubeconfig);
    "type error: drain.outputTail below 256" =
      evalFails (_: (cpWith { settings.drain.outputTail = 100; }).services.nico.settings.drain.outputTail);
    "type error: kubeconfigPublish.interval not a duration" =
      evalFails (_: (cpWith { settings.kubeconfigPublish.interval = "10"; }).services.nico.settings.kubeconfigPublish.interval);
    "type error: a relative statusPage.tls.certFile" =
      evalFails (_: (cpWith { coordinator.settings.statusPage.tls.certFile = "page.crt"; }).services.nico.coordinator.settings.statusPage.tls.certFile);
    "every assertion has a check that makes it fire" = lib.length cp1.assertions == 18;

    "type error: unknown role" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "master" ]; }; }]).services.nico.roles);
    "type error: bad log level" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; settings.log.level = "loud"; }; }]).services.nico.settings.log.level);
    "type error: peer URL without a scheme" =
      evalFails (_: (host [{ services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; settings.etcd.peerURL = "10.0.0.1:2380"; }; }]).services.etcd.listenPeerUrls);
    "type error: a duration without a unit" =
      evalFails (_: (cpWith { settings.generations.healthDeadline = "90"; }).services.nico.settings.generations.healthDeadline);
    "type error: join.listen without a port" =
      evalFails (_: (cpWith { settings.join.listen = "10.0.0.1"; }).services.nico.settings.join.listen);
    "type error: unknown gossip profile" =
      evalFails (_: (cpWith { settings.gossip.profile = "lte"; }).services.nico.settings.gossip.profile);
    "type error: gossip port out of range" =
      evalFails (_: (cpWith { settings.gossip.port = 70000; }).services.nico.settings.gossip.port);
    "type error: a label without =" =
      evalFails (_: (cpWith { settings.hypervisor.labels = [ "rack" ]; }).services.nico.settings.hypervisor.labels);
    "type error: an unknown hypervisor.domainType" =
      evalFails (_: (cpWith { settings.hypervisor.domainType = "KVM"; }).services.nico.settings.hypervisor.domainType);
    "type error: a relative pki.dir" =
      evalFails (_: (cpWith { settings.pki.dir = "pki"; }).services.nico.settings.pki.dir);
    "type error: unknown applier" =
      evalFails (_: (cpWith { settings.generations.applier = "ansible"; }).services.nico.settings.generations.applier);
    "nix build cache (defect 9): CacheDirectory and XDG_CACHE_HOME, home read-only" =
      cp1Agent.CacheDirectory or null == "nico" && cp1Agent.CacheDirectoryMode or null == "0700"
      && cp1.systemd.services.nico-agent.environment.XDG_CACHE_HOME or null == "/var/cache/nico"
      && cp1Agent.ProtectHome == "read-only";
    "start timeouts (defect 10): the agent's and etcd's beyond systemd's 90 s" =
      cp1Agent.TimeoutStartSec or null == "15min" && cp1Etcd.serviceConfig.TimeoutStartSec or null == "30min";
    "advertise (defect 8): default from the host's static private IPv4 address" =
      (host [{ networking.hostName = "a"; networking.interfaces = { eth0.ipv4.addresses = [{ address = "203.0.113.5"; prefixLength = 24; }]; eth1.ipv4.addresses = [{ address = "192.168.1.2"; prefixLength = 24; }]; }; services.nico = { enable = true; seeds = [ "x" ]; tokenFile = "/t"; }; }]).services.nico.settings.gossip.advertise == "192.168.1.2"
      && (host [{ networking.hostName = "a"; networking.interfaces.eth0.ipv4.addresses = [{ address = "203.0.113.5"; prefixLength = 24; }]; services.nico = { enable = true; seeds = [ "x" ]; tokenFile = "/t"; }; }]).services.nico.settings.gossip.advertise == "203.0.113.5"
      && cp1.services.nico.settings.gossip.advertise == null;
    "advertise (defect 8): a warning for QEMU's shared 10.0.2.15, none otherwise" =
      anyContains "user-mode NAT gives every guest"
        (host [{ networking.hostName = "a"; services.nico = { enable = true; seeds = [ "x" ]; tokenFile = "/t"; settings.gossip.advertise = "10.0.2.15"; }; }]).warnings
      && cp1.warnings == [ ] && tls.warnings == [ ];
    "name (defect 12): a host name that is no DNS label fails to evaluate; an explicit name is used" =
      evalFails (_: (host [{ networking.hostName = "Cp_1"; services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; }; }]).services.nico.settings.name)
      && (host [{ networking.hostName = "Cp_1"; services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; settings.name = "cp-1"; }; }]).services.etcd.name == "cp-1";
    "libvirt (defect 12): only hypervisor hosts get the package built with libvirt" =
      cp1.services.nico.package == pkgs.nico && worker.services.nico.package == pkgs.nico
      && hv.services.nico.package == pkgs.nico-hypervisor && !(anyContains "built without libvirt" (failedAssertions hv));
    "config changes (defect 11): the agent reads /etc/nico/agent.yaml, is not restarted by a switch, and restarts itself with exit 4" =
      lib.hasSuffix "--config /etc/nico/agent.yaml" cp1Agent.ExecStart && !cp1.systemd.services.nico-agent.restartIfChanged
      && cp1Agent.RestartForceExitStatus == "4" && !(cp1Agent ? ExecReload);
    "switch guard: a control-plane host's pre-switch check runs the new generation's switch-check on its agent.yaml with the toplevel and action" =
      cp1.system.preSwitchChecks.nico-switch-guard
        == "${pkgs.nico}/bin/nico-agent switch-check --config /nix/store/00000000000000000000000000000000-nico-agent.yaml --wait 15m --answer-timeout 30s \"$1\" \"$2\""
      && (cpWith { switchGuard = { hold = "20m"; wait = "1h"; }; }).system.preSwitchChecks.nico-switch-guard != null
      && lib.hasInfix "--wait 1h --answer-timeout 30s --hold 20m " (cpWith { switchGuard = { hold = "20m"; wait = "1h"; }; }).system.preSwitchChecks.nico-switch-guard;
    "switch guard: none on a data-plane host, nor when disabled" =
      !(worker.system.preSwitchChecks ? nico-switch-guard)
      && !((cpWith { switchGuard.enable = false; }).system.preSwitchChecks ? nico-switch-guard);
    "switch guard: a bad duration fails evaluation" =
      evalFails (_: (cpWith { switchGuard.wait = "soon"; }).system.preSwitchChecks);
    "type error: a function in the freeform settings" =
      evalFails (_: (host [{ services.nico = { enable = true; seeds = [ "a" ]; settings.foo = x: x; }; }]).services.nico.settings);
  };

  # A fleet's objects declared in the flake (nixos-module/objects.nix).
  fleet = extra: host [{
    networking.hostName = "cp-1";
    system.configurationRevision = "abc123";
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      bootstrap = true;
      objects = lib.recursiveUpdate {
        enable = true;
        lastModified = 1700000000;
        etcdCluster = { voters = 3; policy.replaceDeadMembersAfter = "10m"; };
        machinePools.web = { count = 2; template = { vcpus = 1; memoryMiB = 512; diskGiB = 4; baseImage = "x.qcow2"; network = "default"; }; };
        kubernetesClusters.prod = {
          gitRepo = "https://example.org/fleet.git";
          configurationSubdir = "k3s";
          controlPlane.machines = [ "cp-1" ];
          dataPlane = { machineSelector.matchLabels.role = "worker"; count = 2; };
          etcd.provider = "nico";
        };
      } extra;
    };
  }];
  fleetCfg = fleet { };
  manifestDocs = cfg: map builtins.fromJSON (lib.filter (d: d != "") (lib.splitString "---\n" cfg.services.nico.objects.manifest.text));
  objectChecks = {
    "objects: the manifest is a FlakeObjects header, then each object with only the fields set" =
      let docs = manifestDocs fleetCfg; in
      map (d: d.kind) docs == [ "FlakeObjects" "EtcdCluster" "MachinePool" "KubernetesCluster" ]
      && (lib.head docs).spec == { revision = "abc123"; lastModified = 1700000000; kubernetesClusterRemoval = "orphan"; }
      && (lib.elemAt docs 1).spec == { voters = 3; policy.replaceDeadMembersAfter = "10m"; }
      && (lib.elemAt docs 2).metadata.name == "web" && (lib.elemAt docs 2).spec.template.vcpus == 1
      && (lib.elemAt docs 3).apiVersion == "nico.homystack.io/v1alpha1"
      && (lib.elemAt docs 3).spec.dataPlane == { machineSelector.matchLabels.role = "worker"; count = 2; };
    "objects: nico-objects applies it once the agent is ready, when the agent starts again and when the manifest changes" =
      let o = fleetCfg.systemd.services.nico-objects; in
      fleetCfg.services.nico.settings.objects.file == "/etc/nico/objects.yaml"
      && fleetCfg.environment.etc."nico/objects.yaml".source == fleetCfg.services.nico.objects.manifest
      && lib.elem "nico-objects.service" fleetCfg.systemd.services.nico-agent.wants
      && o.after == [ "nico-agent.service" ] && o.partOf == [ "nico-agent.service" ]
      && o.restartTriggers == [ fleetCfg.services.nico.objects.manifest ]
      && o.serviceConfig.Type == "oneshot" && o.serviceConfig.RemainAfterExit
      && lib.hasSuffix "nico-agent apply-objects --config /etc/nico/agent.yaml" o.serviceConfig.ExecStart
      && fleetCfg.systemd.services.nico-agent.reloadTriggers == [ ]
      && !(fleetCfg.systemd.services.nico-agent.serviceConfig ? ExecReload);
    "objects: off by default, and a worker carries no manifest" =
      !(cp1.services.nico.settings ? objects) && !(cp1.environment.etc ? "nico/objects.yaml")
      && !((host [{ networking.hostName = "w-1"; services.nico = { enable = true; seeds = [ "x" ]; tokenFile = "/t"; objects = { enable = true; revision = "r"; lastModified = 1; }; }; }]).environment.etc ? "nico/objects.yaml");
    "objects: no revision, voters 4, a bad pool name, a negative count fail with the option named" =
      anyContains "services.nico.objects.revision is not set" (failedAssertions (host [{ networking.hostName = "cp-1"; services.nico = { enable = true; roles = [ "controlPlane" ]; bootstrap = true; objects = { enable = true; lastModified = 1; }; }; }]))
      && anyContains "services.nico.objects.etcdCluster.voters is 4" (failedAssertions (fleet { etcdCluster.voters = 4; }))
      && anyContains "services.nico.objects.machinePools: the names [\"Web_1\"]" (failedAssertions (fleet { machinePools.Web_1 = { count = 1; }; }))
      && anyContains "services.nico.objects.machinePools.web.count is -1" (failedAssertions (fleet { machinePools.web.count = -1; }))
      && failedAssertions fleetCfg == [ ];
    "type error: a pool's count as a string" =
      evalFails (_: (fleet { machinePools.web.count = "two"; }).services.nico.objects.manifest.text);
    "type error: a field the API does not have" =
      evalFails (_: (fleet { machinePools.web.replicas = 2; }).services.nico.objects.manifest.text);
    "type error: an etcd provider the API does not have" =
      evalFails (_: (fleet { kubernetesClusters.prod.etcd.provider = "consul"; }).services.nico.objects.manifest.text);
    "type error: a duration without a unit in the EtcdCluster's policy" =
      evalFails (_: (fleet { etcdCluster.policy.healthTimeout = "5"; }).services.nico.objects.manifest.text);
  };

  # A check that throws (an evaluation error it provokes) counts as failed.
  allChecks = checks // objectChecks;
  failed = lib.attrNames (lib.filterAttrs (_: ok: let r = builtins.tryEval ok; in !(r.success && r.value)) allChecks);
in
if failed == [ ] then "${toString (lib.length (lib.attrNames allChecks))} module checks passed"
else throw "nixos-module checks failed:\n  ${lib.concatStringsSep "\n  " failed}"
