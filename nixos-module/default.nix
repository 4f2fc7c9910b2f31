# services.nico: the nico agent (and, on control-plane hosts, the
# coordinator and the local etcd member) on a NixOS host.
#
# `services.nico.enable = true` plus `nixos-rebuild switch` is all a host
# needs to join the fleet: the agent registers the machine, and on a
# control-plane host asks the coordinator to add its etcd member as a
# learner, writes the initial-cluster values it returns to an
# EnvironmentFile and starts etcd.service through systemd's D-Bus API
# (the agent's `systemd` runtime). This module only configures nixpkgs'
# services.etcd; it never starts etcd by itself. With https etcd URLs etcd
# runs with mutual TLS on the certificates the agent keeps in pki.dir
# (docs/security.md); see etcdTLS below for how etcd reads them.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption mkEnableOption mkIf mkMerge mkDefault types literalExpression literalMD;

  cfg = config.services.nico;
  st = cfg.settings;
  settingsFormat = pkgs.formats.yaml { };

  isControlPlane = lib.elem "controlPlane" cfg.roles;
  isHypervisor = lib.elem "hypervisor" cfg.roles;

  # Where the agent writes etcd's initial-cluster values; etcd.service reads
  # it (EnvironmentFile= takes precedence over the unit's Environment=).
  etcdEnvFile = "/run/nico/etcd.env";

  # The port of an http(s)://host:port URL or a host:port, as an integer.
  portOf = url: lib.toInt (lib.last (lib.splitString ":" url));
  schemeOf = url: lib.head (lib.splitString ":" url);
  isHttps = lib.hasPrefix "https://";

  gossipPort = st.gossip.port;
  joinPort = portOf st.join.listen;
  recoveryPorts = lib.optional (st.recovery.listen != "") (portOf st.recovery.listen);

  # The agent's certificates and keys (docs/security.md, "Files").
  pkiDir = if st.pki.dir != null then st.pki.dir else "${st.dataDir}/pki";

  # etcd runs with mutual TLS when its URLs are https (docs/security.md).
  # The agent keeps etcd's certificates in pkiDir, which is root's (0700
  # below the 0700 state directory, files 0600), and etcd runs as the etcd
  # user, which can reach nothing there. So before etcd starts, root (the
  # `+` ExecStartPre, outside the unit's sandbox) copies the five files
  # etcd needs into etcd's own runtime directory, /run/etcd-pki (0700,
  # owned by etcd, removed when etcd stops), and services.etcd names those
  # copies: the CA key, the secrets key and the node's key are never
  # copied. The agent's systemd runtime leaves the TLS settings to the
  # unit (pkg/member SystemdConfig.TLSInEnvironment is false). The copies
  # are made when etcd starts: a renewed server or peer certificate
  # reaches etcd at its next restart.
  etcdTLS = isHttps st.etcd.clientURL || isHttps st.etcd.peerURL;
  etcdPkiCopy = "/run/etcd-pki";
  etcdPkiFiles = [ "ca.crt" "etcd-server.crt" "etcd-server.key" "etcd-peer.crt" "etcd-peer.key" ];
  inPki = f: "${pkiDir}/${f}";
  inPkiCopy = f: "${etcdPkiCopy}/${f}";
  loopbackClientURL = "${schemeOf st.etcd.clientURL}://127.0.0.1:${toString (portOf st.etcd.clientURL)}";

  # The coordinator reads its client certificate (and, on a machine that
  # joined, gossip.secret and node.key for its mesh member) straight from
  # pkiDir, as root without capabilities and with a read-only file system
  # (its unit below). Endpoints it learns from the mesh are https, as the
  # agents' client URLs must be.
  coordinatorEndpoints = cfg.coordinator.settings.etcd.endpoints;
  coordinatorTLS = coordinatorEndpoints == [ ] || lib.any isHttps coordinatorEndpoints;
  # On a host that joins through seeds, the coordinator's own member of the
  # mesh, which names it the etcd voters (etcd.endpoints left empty).
  coordinatorGossip = cfg.seeds != [ ];
  # The coordinator's gossip port (pkg/config CoordinatorGossipPort: the
  # agent's default port + 1) unless its settings give one.
  coordinatorGossipPort = lib.toInt (toString (cfg.coordinator.settings.gossip.port or 7947));
  coordinatorGossipPorts = lib.optional (cfg.coordinator.enable && coordinatorGossip && coordinatorGossipPort != 0) coordinatorGossipPort;

  # Keys left null (and sections left empty by that) are not rendered: the
  # program's default applies.
  dropNulls = v:
    if lib.isAttrs v then
      lib.filterAttrs (_: x: x != { }) (lib.mapAttrs (_: dropNulls) (lib.filterAttrs (_: x: x != null) v))
    else v;
  agentConfigFile = settingsFormat.generate "nico-agent.yaml" (dropNulls st);
  coordinatorConfigFile = settingsFormat.generate "nico-coordinator.yaml" (dropNulls (lib.recursiveUpdate
    (lib.optionalAttrs coordinatorTLS {
      tls = { caFile = inPki "ca.crt"; certFile = inPki "coordinator.crt"; keyFile = inPki "coordinator.key"; };
    })
    cfg.coordinator.settings));

  # A secret must be read from a file at run time: a Nix path or a store
  # path would put it in the world-readable Nix store.
  inStore = f: f != null && (builtins.isPath f || lib.hasPrefix builtins.storeDir (toString f));

  # Option types of the agent's keys (pkg/config).
  duration = types.strMatching "([0-9]+(\\.[0-9]+)?(ns|us|ms|s|m|h))+" // {
    description = "Go duration (such as \"30s\" or \"2m\")";
  };
  absPath = types.strMatching "/.*" // { description = "absolute path"; };
  hostPort = types.strMatching "[^ ]*:[0-9]+" // { description = "host:port (host may be empty)"; };

  # A machine name: a DNS label, as pkg/config accepts it.
  dnsLabel = "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
  isDnsLabel = n: builtins.match dnsLabel n != null;
  hostName = config.networking.hostName;
  suggestedName = lib.toLower (lib.replaceStrings [ "_" "." ] [ "-" "-" ] hostName);

  # The host's static IPv4 addresses (networking.interfaces.*.ipv4.addresses,
  # interfaces in name order), private ones (RFC 1918) first: the default
  # gossip.advertise. DHCP addresses are not known at evaluation.
  staticIPv4 = lib.concatMap (i: map (a: a.address) (i.ipv4.addresses or [ ]))
    (lib.attrValues (config.networking.interfaces or { }));
  isPrivateIPv4 = a: builtins.match "(10\\..*|192\\.168\\..*|172\\.(1[6-9]|2[0-9]|3[01])\\..*)" a != null;
  defaultAdvertise =
    let candidates = lib.filter isPrivateIPv4 staticIPv4 ++ lib.filter (a: !isPrivateIPv4 a) staticIPv4;
    in if candidates == [ ] then null else lib.head candidates;
  # The address QEMU's and VirtualBox's user-mode NAT give every guest:
  # advertised, every machine would claim the same one.
  sharedNATAddress = "10.0.2.15";

  # The agent's cache (the nixos applier's `nix build`: $XDG_CACHE_HOME/nix),
  # writable under ProtectHome=read-only.
  agentCacheDir = "/var/cache/nico";

  # The agent runs with the configuration /etc/nico/agent.yaml links to (the
  # file of the current generation), so that an agent started after a
  # switch reads that generation's settings; see restartIfChanged below.
  agentConfigLink = "/etc/nico/agent.yaml";

  # The typed metrics.* and statusPage.* options, and their assertions.
  endpoints = import ./endpoints.nix { inherit lib; };
  metricsServes = program: "${program}'s `/metrics` (Prometheus) and `/debug/pprof/` (docs/monitoring.md)";
  coordSettings = cfg.coordinator.settings;

in
{
  # The switch guard (switchguard.nix) and the fleet's objects declared in
  # the flake (objects.nix: services.nico.objects).
  imports = [ ./switchguard.nix ./objects.nix ];

  options.services.nico = {
    enable = mkEnableOption "nico, the agent that makes this host join the fleet and its etcd cluster";

    package = mkOption {
      type = types.package;
      default = if isHypervisor then pkgs.nico-hypervisor else pkgs.nico;
      defaultText = literalExpression ''if elem "hypervisor" config.services.nico.roles then pkgs.nico-hypervisor else pkgs.nico'';
      description = ''
        The nico package (nico-agent, nico-coordinator, nicoctl, and
        nico-etcd-proxy for Kubernetes distributions with no etcd prefix). `nico` is
        built without libvirt, so that it stays out of every host's closure;
        hosts with the `hypervisor` role need `nico-hypervisor`, the same
        programs built with cgo and libvirt (the flake's packages and
        overlay have both).
      '';
    };

    roles = mkOption {
      type = types.nonEmptyListOf (types.enum [ "controlPlane" "worker" "hypervisor" ]);
      default = [ "worker" ];
      example = [ "controlPlane" ];
      description = ''
        Roles of this host. `controlPlane` runs an etcd member (nixpkgs'
        etcd.service, started by the agent) and a coordinator candidate;
        `worker` runs workloads; `hypervisor` runs libvirt and lets the
        agent define VMs.
      '';
    };

    bootstrap = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Start a new etcd cluster on this host. Set it on one control-plane
        host, once; every other host joins through `seeds`.
      '';
    };

    seeds = mkOption {
      type = types.listOf types.str;
      default = [ ];
      example = [ "10.0.0.1" "cp-2.example.org:7946" ];
      description = "Gossip addresses (host or host:port) of hosts already in the fleet; rendered to the agent's `gossip.seeds`.";
    };

    tokenFile = mkOption {
      type = types.nullOr (types.either types.str types.path);
      default = null;
      example = "/run/keys/nico-token";
      description = ''
        File holding the fleet's join token, read by the agent at run time
        (rendered to the agent's `tokenFile`). Give a path outside the Nix
        store (agenix, sops-nix, or a file put there by hand): a Nix path
        literal would be copied into the world-readable store.
      '';
    };

    openFirewall = mkOption {
      type = types.bool;
      default = false;
      description = ''
        Open the gossip port (`settings.gossip.port`, TCP and UDP) and, on
        control-plane hosts, etcd's peer and client ports, the join
        endpoint's port (`settings.join.listen`, TCP) and the recovery API's
        (`settings.recovery.listen`, TCP); on a host whose
        coordinator joins the mesh (`seeds` set), its gossip port too
        (`coordinator.settings.gossip.port`, 7947 by default, TCP and UDP).
      '';
    };

    hypervisor.storagePools = mkOption {
      type = types.attrsOf absPath;
      default = { };
      example = { default = "/var/lib/libvirt/images"; };
      description = ''
        libvirt directory storage pools (name = directory) defined, started
        and marked autostart before the agent starts, on hosts with the
        `hypervisor` role. Machine pools name them in
        `template.storagePool`; their base images are volumes in them.
      '';
    };

    coordinator = {
      enable = mkOption {
        type = types.bool;
        default = isControlPlane;
        defaultText = literalExpression ''elem "controlPlane" config.services.nico.roles'';
        description = "Run a nico-coordinator candidate on this host (one is elected leader).";
      };
      settings = mkOption {
        type = types.submodule {
          freeformType = settingsFormat.type;
          options.metrics = endpoints.options { serves = metricsServes "the coordinator"; defaultListen = "127.0.0.1:9480"; clients = "scrapers"; };
          options.statusPage = endpoints.options {
            serves = "the read-only status page (docs/statuspage.md)";
            defaultListen = "127.0.0.1:9490";
            clients = "readers (whose Common Name must be root, nico-coordinator or nico-viewer)";
            tlsNote = " With `tls.certFile` set it is TLS on loopback too.";
          };
          options.etcd.endpoints = mkOption {
            type = types.listOf types.str;
            default = if cfg.seeds != [ ] then [ ] else [ cfg.settings.etcd.clientURL ];
            defaultText = literalExpression ''if config.services.nico.seeds != [ ] then [ ] else [ config.services.nico.settings.etcd.clientURL ]'';
            description = ''
              Client URLs of the etcd cluster. Empty (the default on a host
              with `seeds`): the coordinator learns the voters' client URLs
              from the gossip mesh, which it joins through `seeds` with
              `tokenFile`, as the agent does; on a host that joins, its own
              etcd member does not serve before the join. Without seeds (the
              bootstrap host), the local member.
            '';
          };
        };
        default = { };
        description = "nico-coordinator's configuration (its keys, as `nico-coordinator --help` lists them), rendered to YAML.";
      };
    };

    settings = mkOption {
      description = ''
        nico-agent's configuration, rendered to YAML (`--config`). Any key
        `nico-agent --help` lists may be set; the agent refuses unknown keys.
        The keys set most often are typed below.
      '';
      default = { };
      example = literalExpression ''
        {
          etcd.peerURL = "https://10.0.0.1:2380";
          etcd.clientURL = "https://10.0.0.1:2379";
          etcd.endpoints = [ "https://10.0.0.2:2379" ];
          log.level = "debug";
        }
      '';
      type = types.submodule {
        freeformType = settingsFormat.type;
        options = {
          name = mkOption {
            type = types.strMatching dnsLabel // {
              description = "DNS label (lowercase letters, digits and '-', starting and ending with a letter or digit, at most 63 characters)";
            };
            default =
              if isDnsLabel hostName then hostName
              else throw "services.nico.settings.name defaults to networking.hostName (\"${hostName}\"), which is not a DNS label (lowercase letters, digits and '-', at most 63 characters), as nico's machine names must be: set services.nico.settings.name, for instance to \"${suggestedName}\"";
            defaultText = literalExpression "config.networking.hostName";
            description = ''
              This machine's name in nico, a DNS label. The host name by
              default; a host name with capitals or `_` is not a DNS label,
              so such a host must set this.
            '';
          };
          dataDir = mkOption {
            type = types.str;
            default = "/var/lib/nico";
            description = "The agent's state directory.";
          };
          etcd.peerURL = mkOption {
            type = types.strMatching "https?://[^/]+:[0-9]+";
            default = "https://127.0.0.1:2380";
            example = "https://10.0.0.1:2380";
            description = "URL on which this host's etcd member talks to its peers (listened on and advertised).";
          };
          etcd.clientURL = mkOption {
            type = types.strMatching "https?://[^/]+:[0-9]+";
            default = "https://127.0.0.1:2379";
            example = "https://10.0.0.1:2379";
            description = ''
              URL on which this host's etcd member serves clients (listened on
              and advertised). With the `systemd` runtime (the module's
              default on control-plane hosts) etcd.service also listens on
              127.0.0.1 at the same port, for nicoctl, etcdctl and the
              coordinator on this host; the `embedded` and `exec` runtimes
              listen on this URL only.
            '';
          };
          etcd.endpoints = mkOption {
            type = types.listOf types.str;
            default = [ ];
            description = "Client URLs of the running etcd cluster. May stay empty on a host with `seeds` (the agent learns them from the gossip mesh) and on the bootstrap host.";
          };
          etcd.clusterToken = mkOption {
            type = types.str;
            default = "nico";
            description = "etcd's initial cluster token.";
          };
          log.level = mkOption {
            type = types.enum [ "debug" "info" "warn" "error" ];
            default = "info";
            description = "Log level.";
          };

          gossip.port = mkOption {
            type = types.coercedTo (types.strMatching "[0-9]+") lib.toInt types.port;
            default = 7946;
            description = "Gossip port, TCP and UDP (0: any free port; then openFirewall opens none).";
          };
          gossip.advertise = mkOption {
            type = types.nullOr types.str;
            default = defaultAdvertise;
            defaultText = literalMD "the first static IPv4 address of `networking.interfaces` (private ones first), else null";
            example = "10.0.0.1";
            description = ''
              IP address other machines reach this host's gossip on (the
              agent's, and on a host with `seeds` the coordinator's). null
              leaves it to the programs: the bind address, or with the
              default bind (0.0.0.0) a private address of the host's, else
              a public one on the default route, else 127.0.0.1 on a
              loopback-only host, else they fail to start naming this key.
              Set it where that guess is wrong: a host on several private
              networks, or with several public addresses off the default
              route; the module warns when it is
              ${sharedNATAddress}, the user-mode NAT address every QEMU (and
              VirtualBox) guest has.
            '';
          };
          gossip.profile = mkOption {
            type = types.enum [ "lan" "wan" "fast" ];
            default = "lan";
            description = "Gossip timings: `lan` (a crash is seen in about 6 s), `wan` (about 30 s), `fast` (about 0.5 s; tests and small quiet networks).";
          };

          pki.dir = mkOption {
            type = types.nullOr absPath;
            default = null;
            defaultText = literalExpression ''"''${config.services.nico.settings.dataDir}/pki"'';
            description = "Directory of this host's certificates and keys (0700); null means `<dataDir>/pki`.";
          };
          pki.caCertFile = mkOption {
            type = types.nullOr absPath;
            default = null;
            description = "A CA certificate (PEM) for the bootstrap host to use instead of making one; with `pki.caKeyFile`.";
          };
          pki.caKeyFile = mkOption {
            type = types.nullOr absPath;
            default = null;
            example = "/run/keys/nico-ca.key";
            description = "The private key of `pki.caCertFile`: a path outside the Nix store, read at run time.";
          };

          join.listen = mkOption {
            type = hostPort;
            default = ":7950";
            description = "host:port on which control-plane agents holding the CA key serve the join endpoint (HTTPS).";
          };
          recovery.listen = mkOption {
            type = types.either hostPort (types.enum [ "" ]);
            default = ":7951";
            description = "host:port of the recovery API control-plane agents serve (HTTPS; only the operator's root certificate is accepted) for `nicoctl restore` and `nicoctl recover --agents`; empty serves nothing.";
          };
          join.endpoints = mkOption {
            type = types.listOf hostPort;
            default = [ ];
            example = [ "10.0.0.1:7950" ];
            description = "Join endpoints tried in order by a host without a certificate; empty means the hosts of the gossip seeds at port 7950.";
          };

          generations.applier = mkOption {
            type = types.enum [ "none" "exec" "nixos" ];
            default = "none";
            description = ''
              How the agent applies this host's NixOS generations (rollouts):
              `nixos` fetches the flake, builds its toplevel and switches to
              it; `exec` runs `generations.command`; `none` leaves them alone.
            '';
          };
          generations.command = mkOption {
            type = types.listOf types.str;
            default = [ ];
            example = [ "/etc/nico/apply-generation" ];
            description = "The exec applier's command and arguments; it gets NICO_ACTION (apply or rollback), NICO_GENERATION, NICO_GIT_REPO, NICO_REF, NICO_REVISION, NICO_FLAKE_ATTR, ...";
          };
          generations.healthDeadline = mkOption {
            type = duration;
            default = "2m";
            description = "How long the health checks may take to pass after an activation before the agent rolls it back.";
          };
          generations.checkCommands = mkOption {
            type = types.listOf types.str;
            default = [ ];
            example = [ "systemctl is-active --quiet nginx.service" ];
            description = "Health checks: shell commands (`sh -c`) that must exit 0 after an activation.";
          };
          generations.httpChecks = mkOption {
            type = types.listOf (types.strMatching "https?://[^/]+.*");
            default = [ ];
            example = [ "http://127.0.0.1:10248/healthz" ];
            description = "Health checks: URLs that must answer 2xx after an activation.";
          };
          generations.agentPathFile = mkOption {
            type = types.str;
            default = "/etc/nico/agent-path";
            description = ''
              A file naming the nico-agent the running system installed; the
              module writes it. After applying a generation that changes it,
              the agent exits 4 and systemd starts the new agent, which
              reports the generation (a switch itself never restarts the
              agent, as the agent runs it). Empty: the agent never restarts
              itself. The agent's own default is the same path.
            '';
          };
          generations.allowFailedUnits = mkOption {
            type = types.listOf types.str;
            default = [ ];
            example = [ "user@*.service" ];
            description = "systemd unit globs that may be failed after an activation (nixos applier).";
          };

          labels = mkOption {
            type = types.listOf (types.strMatching "[^=]+=.*");
            default = [ ];
            example = [ "topology=rack-a" ];
            description = "Labels of this machine (key=value) in its Node. `topology` names its failure domain: the coordinator spreads etcd voters over its values.";
          };

          metrics = endpoints.options { serves = metricsServes "the agent"; defaultListen = "127.0.0.1:9479"; clients = "scrapers"; };

          componentProbes = (import ./componentprobes.nix { inherit lib; }).options;

          inherit (import ./clusterhooks.nix { inherit lib; }) drain kubeconfigPublish;

          hypervisor.uri = mkOption {
            type = types.str;
            default = "qemu:///system";
            description = "libvirt connection URI of a host with the `hypervisor` role.";
          };
          hypervisor.labels = mkOption {
            type = types.listOf (types.strMatching "[^=]+=.*");
            default = [ ];
            example = [ "rack=a" "gpu=true" ];
            description = "Labels of this hypervisor host (key=value), matched by machine pools' `hostSelector`.";
          };
          hypervisor.domainType = mkOption {
            type = types.enum [ "auto" "kvm" "qemu" ];
            default = "auto";
            description = ''
              Type of the domains this host defines. `auto` gives them `kvm`
              where libvirt offers it (qemu can use `/dev/kvm`), until a kvm
              guest shows no sign of booting (a nested or paravirtualized KVM
              that cannot run guests): then `qemu`, software emulation, until
              the agent restarts. `kvm` and `qemu` fix the type.
            '';
          };
        };
      };
    };
  };

  config = mkIf cfg.enable (mkMerge [
    {
      assertions = [
        {
          assertion = cfg.bootstrap -> isControlPlane;
          message = "services.nico.bootstrap starts a new etcd cluster, so it needs services.nico.roles to include \"controlPlane\" (roles are ${builtins.toJSON cfg.roles}).";
        }
        {
          assertion = cfg.bootstrap || cfg.seeds != [ ];
          message = "services.nico.seeds is empty and services.nico.bootstrap is false: list the gossip address of at least one host in the fleet, or set bootstrap on the host that starts it.";
        }
        {
          assertion = cfg.seeds != [ ] -> cfg.tokenFile != null;
          message = "services.nico.seeds is set but services.nico.tokenFile is not: the gossip mesh is encrypted with keys derived from the fleet's token; give the path of the file that holds it.";
        }
        {
          assertion = !inStore cfg.tokenFile;
          message = "services.nico.tokenFile (${toString cfg.tokenFile}) is in the Nix store, or a Nix path that would be copied there, readable by every user: give the path of a file outside the store as a string, such as \"/run/keys/nico-token\".";
        }
        {
          assertion = !(st ? token || st ? gossip && st.gossip ? key);
          message = "services.nico.settings holds a secret (token or gossip.key), which would be written to the Nix store: put it in a file and set services.nico.tokenFile.";
        }
        {
          assertion = !inStore st.pki.caKeyFile;
          message = "services.nico.settings.pki.caKeyFile (${toString st.pki.caKeyFile}) is in the Nix store, readable by every user: give the path of a file outside the store, such as \"/run/keys/nico-ca.key\".";
        }
        {
          assertion = (st.pki.caCertFile == null) == (st.pki.caKeyFile == null);
          message = "services.nico.settings.pki.caCertFile and pki.caKeyFile go together: give both (a CA of your own) or neither (the bootstrap host makes one).";
        }
        {
          assertion = isControlPlane -> isHttps st.etcd.clientURL && isHttps st.etcd.peerURL;
          message = "services.nico.settings.etcd.clientURL (${st.etcd.clientURL}) and etcd.peerURL (${st.etcd.peerURL}) must both be https: etcd runs with mutual TLS only, and nico-agent refuses an http URL.";
        }
        {
          assertion = lib.all isHttps st.etcd.endpoints;
          message = "services.nico.settings.etcd.endpoints (${lib.concatStringsSep ", " st.etcd.endpoints}) must all be https: etcd runs with mutual TLS only, and nico-agent refuses an http URL.";
        }
        {
          assertion = st.generations.applier == "exec" -> st.generations.command != [ ];
          message = "services.nico.settings.generations.applier is \"exec\" but generations.command is empty: give the command that applies a generation.";
        }
        {
          assertion = isHypervisor -> cfg.package.withLibvirt or true;
          message = "services.nico.roles includes \"hypervisor\" but services.nico.package (${cfg.package.name or "?"}) is built without libvirt, so its agent cannot define VMs: use the nico-hypervisor package.";
        }
        {
          assertion = cfg.hypervisor.storagePools != { } -> isHypervisor;
          message = "services.nico.hypervisor.storagePools is set but services.nico.roles does not include \"hypervisor\" (roles are ${builtins.toJSON cfg.roles}).";
        }
      ] ++ endpoints.assertions "services.nico.settings.metrics" st.metrics inStore
      ++ lib.optionals cfg.coordinator.enable (endpoints.assertions "services.nico.coordinator.settings.metrics" coordSettings.metrics inStore
        ++ endpoints.assertions "services.nico.coordinator.settings.statusPage" coordSettings.statusPage inStore);

      warnings = lib.optional (st.gossip.advertise == sharedNATAddress)
        "services.nico.settings.gossip.advertise is ${sharedNATAddress}, the address QEMU's (and VirtualBox's) user-mode NAT gives every guest: other machines cannot reach this one there, and every such machine would advertise the same address. Set it to this host's address on the network the fleet shares (in NixOS VM tests, config.networking.primaryIPAddress).";

      services.nico.settings = mkMerge [
        {
          roles = mkDefault cfg.roles;
          bootstrap = mkDefault cfg.bootstrap;
        }
        (mkIf (cfg.seeds != [ ]) { gossip.seeds = mkDefault cfg.seeds; })
        (mkIf (cfg.tokenFile != null) { tokenFile = mkDefault (toString cfg.tokenFile); })
        (mkIf isControlPlane {
          etcd.runtime = mkDefault "systemd";
          etcd.unit = mkDefault "etcd.service";
          # The binary the unit runs: the agent runs it itself for a
          # recovery's forced start (--force-new-cluster), which the unit
          # does not pass.
          etcd.binary = mkDefault "${config.services.etcd.package or pkgs.etcd}/bin/etcd";
          etcd.environmentFile = mkDefault etcdEnvFile;
          etcd.dataDir = mkDefault config.services.etcd.dataDir;
        })
      ];

      # For operators: nicoctl, and the configuration the agent runs with.
      environment.systemPackages = [ cfg.package ];
      environment.etc."nico/agent.yaml".source = agentConfigFile;
      # Which nico-agent this generation installs (generations.agentPathFile).
      environment.etc."nico/agent-path".text = "${cfg.package}/bin/nico-agent\n";

      systemd.services.nico-agent = {
        description = "nico agent: keeps this host in the fleet";
        wantedBy = [ "multi-user.target" ];
        wants = [ "network-online.target" ];
        after = [ "network-online.target" ];
        # The agent applies new generations itself: it runs
        # switch-to-configuration in a transient unit and then waits on its
        # health checks. A switch restarting the agent would cut those
        # checks short (and a restarted agent finds the generation already
        # current and skips them), so a switch never restarts it
        # (switch-to-configuration lists it as "NOT restarting").
        #
        # How a new configuration or package reaches the running agent
        # instead (the contract between this module and nico-agent):
        #   - the agent is started with --config /etc/nico/agent.yaml, a
        #     link to the current generation's file, and
        #     /etc/nico/agent-path (generations.agentPathFile) names the
        #     current generation's nico-agent;
        #   - the agent remembers the contents of its --config file and its
        #     own executable when it starts, and compares them with what
        #     those two files hold now: after applying a generation itself
        #     (once the health checks passed), and every few seconds
        #     otherwise, which catches a `nixos-rebuild switch` it did not
        #     start;
        #   - when either differs, it waits for a safe point (no
        #     activation, health gate, rollback, join or removal step in
        #     flight), logs what changed and exits 4; RestartForceExitStatus
        #     makes systemd start it again from the unit as the switch left
        #     it (switch-to-configuration reloads systemd's units even
        #     when it does not restart one), so the new nico-agent runs
        #     with the new settings, PATH and environment;
        #   - nothing else: no reload, no signal from the switch.
        restartIfChanged = false;
        # systemctl and systemd-run (etcd.service, activations); sh for
        # generations.checkCommands; nix and git for the nixos applier.
        path = [ config.systemd.package pkgs.bash ]
          ++ lib.optionals (st.generations.applier == "nixos") [ config.nix.package pkgs.git ];
        # The nixos applier's `nix build` caches in $XDG_CACHE_HOME/nix:
        # root's home is read-only here (ProtectHome).
        environment.XDG_CACHE_HOME = agentCacheDir;
        serviceConfig = {
          Type = "notify";
          NotifyAccess = "main";
          WatchdogSec = "30s";
          # READY comes once this host is a voter (control plane) or
          # registered: a join with a large store takes longer than
          # systemd's default 90 s. The agent also extends the timeout
          # (EXTEND_TIMEOUT_USEC) while its join makes progress; this is
          # the limit for a start that makes none.
          TimeoutStartSec = "15min";
          ExecStart = "${cfg.package}/bin/nico-agent --config ${agentConfigLink}";
          Restart = "on-failure";
          RestartSec = "5s";
          # 3: this node was removed from the cluster; starting again
          # would rejoin it at once.
          RestartPreventExitStatus = "3";
          # 4: the applied generation installs another nico-agent or other
          # settings; start the unit again.
          RestartForceExitStatus = "4";
          SuccessExitStatus = "4";
          StateDirectory = "nico";
          StateDirectoryMode = "0700";
          CacheDirectory = "nico";
          CacheDirectoryMode = "0700";
          RuntimeDirectory = "nico";
          # etcd.service reads its environment file from here, also while
          # the agent restarts.
          RuntimeDirectoryPreserve = "yes";
          # Root, without a sandbox that would break what the agent does:
          # switching generations, wiping etcd's data dir, talking to
          # systemd and libvirt over their sockets.
          User = "root";
          PrivateTmp = true;
          ProtectHome = "read-only";
          LockPersonality = true;
          RestrictRealtime = true;
          RestrictSUIDSGID = true;
          SystemCallArchitectures = "native";
          UMask = "0077";
        };
      };
    }

    (mkIf isControlPlane {
      services.etcd = {
        enable = true;
        name = st.name;
        listenPeerUrls = [ st.etcd.peerURL ];
        initialAdvertisePeerUrls = [ st.etcd.peerURL ];
        # nicoctl and the coordinator on this host use the loopback address.
        listenClientUrls = lib.unique [ st.etcd.clientURL loopbackClientURL ];
        advertiseClientUrls = [ st.etcd.clientURL ];
        initialClusterToken = st.etcd.clusterToken;
      };

      # nicoctl and etcdctl in a root shell on this host: the local member,
      # and with TLS root's certificate from pkiDir (their keys, as NICO_*
      # and ETCDCTL_* variables).
      environment.variables = mkMerge [
        {
          NICO_ENDPOINTS = loopbackClientURL;
          ETCDCTL_ENDPOINTS = loopbackClientURL;
        }
        (mkIf etcdTLS {
          NICO_TLS_CAFILE = inPki "ca.crt";
          NICO_TLS_CERTFILE = inPki "root.crt";
          NICO_TLS_KEYFILE = inPki "root.key";
          NICO_SECRETS_KEYFILE = inPki "secrets.key";
          ETCDCTL_CACERT = inPki "ca.crt";
          ETCDCTL_CERT = inPki "root.crt";
          ETCDCTL_KEY = inPki "root.key";
        })
      ];

      # Ordered after etcd, so that at shutdown the agent stops first and
      # hands etcd leadership to a healthy peer before etcd stops.
      systemd.services.nico-agent.after = [ "etcd.service" ];

      # etcd is started, restarted and stopped by the agent only.
      systemd.services.etcd = {
        wantedBy = lib.mkForce [ ];
        restartIfChanged = false;
        serviceConfig = {
          EnvironmentFile = "-${etcdEnvFile}";
          Restart = lib.mkForce "no";
          # etcd sends READY once it serves; a learner first receives the
          # store (a snapshot) from the leader, which takes longer than
          # systemd's default 90 s for a large one. The agent, which
          # started it, watches its progress and stops it on its own
          # deadline.
          TimeoutStartSec = "30min";
          # The agent wipes the data dir of a removed member (keeping a
          # copy); recreate it for the etcd user before each start. What
          # the agent wrote into it as root (a restored snapshot, a
          # recovery's forced start under the agent) is handed to etcd.
          ExecStartPre = [
            "+${pkgs.coreutils}/bin/install -d -m 0700 -o etcd -g etcd ${config.services.etcd.dataDir}"
            "+${pkgs.coreutils}/bin/chown -R etcd:etcd ${config.services.etcd.dataDir}"
          ];
        };
      };
    })

    (mkIf (isControlPlane && etcdTLS) {
      services.etcd = {
        certFile = inPkiCopy "etcd-server.crt";
        keyFile = inPkiCopy "etcd-server.key";
        trustedCaFile = inPkiCopy "ca.crt";
        peerCertFile = inPkiCopy "etcd-peer.crt";
        peerKeyFile = inPkiCopy "etcd-peer.key";
        peerTrustedCaFile = inPkiCopy "ca.crt";
        clientCertAuth = true;
        peerClientCertAuth = true;
      };
      systemd.services.etcd.serviceConfig = {
        RuntimeDirectory = baseNameOf etcdPkiCopy;
        RuntimeDirectoryMode = "0700";
        # No BindReadOnlyPaths= of the copies over pkiDir: a bind applies to
        # `+` commands too, so this copy would read the empty bind.
        ExecStartPre = [ "+${pkgs.coreutils}/bin/install -m 0400 -o etcd -g etcd ${lib.concatMapStringsSep " " inPki etcdPkiFiles} ${etcdPkiCopy}/" ];
      };
    })

    (mkIf cfg.coordinator.enable {
      # The candidate's name is the machine's (its mesh member opens the
      # gossip secret sealed to that node); on a host that joins, its own
      # mesh member, beside the agent's, through the same seeds and token.
      services.nico.coordinator.settings = mkMerge [
        { name = mkDefault st.name; }
        (mkIf coordinatorGossip {
          gossip.seeds = mkDefault cfg.seeds;
          gossip.profile = mkDefault st.gossip.profile;
          gossip.advertise = mkDefault st.gossip.advertise;
          gossip.bind = mkDefault (st.gossip.bind or null);
          tokenFile = mkDefault (toString cfg.tokenFile);
        })
      ];
      environment.etc."nico/coordinator.yaml".source = coordinatorConfigFile;
      # pki.dir (and the data dir holding it) as the agent makes them, root's
      # and 0700, from boot on: the coordinator's unit binds pki.dir.
      systemd.tmpfiles.rules = lib.optional (lib.hasPrefix "${st.dataDir}/" pkiDir) "d ${st.dataDir} 0700 root root -"
        ++ [ "d ${pkiDir} 0700 root root -" ];
      systemd.services.nico-coordinator = {
        description = "nico coordinator candidate";
        wantedBy = [ "multi-user.target" ];
        wants = [ "network-online.target" ];
        after = [ "network-online.target" "nico-agent.service" ];
        serviceConfig = {
          Type = "notify";
          NotifyAccess = "main";
          WatchdogSec = "30s";
          ExecStart = "${cfg.package}/bin/nico-coordinator --config ${coordinatorConfigFile}";
          # On a host that joins, the coordinator may start before its
          # agent has joined: it then waits, in the activating state, for
          # the identity the agent writes into pki.dir (coordinator.crt)
          # and for the mesh to name the etcd voters, logging what it waits
          # for and extending this timeout (EXTEND_TIMEOUT_USEC, 60 s every
          # 20 s) meanwhile. The limit is for a start that sends nothing.
          TimeoutStartSec = "2min";
          Restart = "always";
          RestartSec = "5s";
          # Its TLS files are read straight from pki.dir (root's, 0700,
          # files 0600), as they appear and as they are renewed, so it runs
          # as root, but with no capability at all (no CAP_DAC_OVERRIDE:
          # files of other users stay closed to it, etcd's data dir
          # included) and a read-only file system: pki.dir stays as the
          # agent keeps it. No systemd credentials: a missing file would
          # fail the start before the program runs, and credentials are
          # read only at start.
          User = "root";
          CapabilityBoundingSet = "";
          ProtectSystem = "strict";
          # Of /var/lib (other services' state, systemd's credential key)
          # it sees pki.dir only (and tokenFile, wherever it is), read-only;
          # tmpfiles (below) makes pki.dir before the agent first runs, so
          # that there is a directory to bind, where the agent's files then
          # appear. (A `+` ExecStartPre cannot make it: systemd sets up the
          # same mount namespace for it.)
          TemporaryFileSystem = "/var/lib:ro";
          BindReadOnlyPaths = [ pkiDir ] ++ lib.optional (cfg.coordinator.settings.tokenFile or null != null) "-${cfg.coordinator.settings.tokenFile}";
          ProtectHome = true;
          PrivateTmp = true;
          PrivateDevices = true;
          NoNewPrivileges = true;
          ProtectKernelTunables = true;
          ProtectKernelModules = true;
          ProtectKernelLogs = true;
          ProtectControlGroups = true;
          ProtectClock = true;
          ProtectHostname = true;
          RestrictNamespaces = true;
          RestrictRealtime = true;
          RestrictSUIDSGID = true;
          # AF_NETLINK: its mesh member lists the host's addresses to pick
          # the one it advertises (pkg/gossip HostAddrs).
          RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ] ++ lib.optional coordinatorGossip "AF_NETLINK";
          LockPersonality = true;
          MemoryDenyWriteExecute = true;
          SystemCallArchitectures = "native";
          UMask = "0077";
        };
      };
    })

    (mkIf isHypervisor {
      virtualisation.libvirtd.enable = true;
      systemd.services.nico-agent = {
        after = [ "libvirtd.service" ] ++ lib.optional (cfg.hypervisor.storagePools != { }) "nico-libvirt-pools.service";
        requires = [ "libvirtd.service" ];
        wants = lib.optional (cfg.hypervisor.storagePools != { }) "nico-libvirt-pools.service";
        serviceConfig.SupplementaryGroups = [ "libvirtd" ];
      };
    })

    (mkIf (isHypervisor && cfg.hypervisor.storagePools != { }) {
      # Directory storage pools for machine pools' base images and overlays.
      systemd.services.nico-libvirt-pools = {
        description = "nico: libvirt storage pools of this hypervisor host";
        after = [ "libvirtd.service" ];
        requires = [ "libvirtd.service" ];
        serviceConfig = {
          Type = "oneshot";
          RemainAfterExit = true;
          ExecStart = pkgs.writeShellScript "nico-libvirt-pools" (''
            set -eu
            virsh() { ${config.virtualisation.libvirtd.package}/bin/virsh -c ${lib.escapeShellArg st.hypervisor.uri} "$@"; }
          '' + lib.concatStrings (lib.mapAttrsToList (name: dir: ''
            mkdir -p ${lib.escapeShellArg dir}
            virsh pool-info ${lib.escapeShellArg name} >/dev/null 2>&1 || virsh pool-define-as ${lib.escapeShellArg name} dir --target ${lib.escapeShellArg dir}
            virsh pool-info ${lib.escapeShellArg name} | grep -q '^State: *running' || virsh pool-start ${lib.escapeShellArg name}
            virsh pool-autostart ${lib.escapeShellArg name}
          '') cfg.hypervisor.storagePools));
        };
      };
    })

    (mkIf cfg.openFirewall {
      networking.firewall.allowedTCPPorts =
        lib.optional (gossipPort != 0) gossipPort
        ++ lib.optionals isControlPlane ([ (portOf st.etcd.peerURL) (portOf st.etcd.clientURL) joinPort ] ++ recoveryPorts)
        ++ coordinatorGossipPorts;
      networking.firewall.allowedUDPPorts = lib.optional (gossipPort != 0) gossipPort ++ coordinatorGossipPorts;
    })
  ]);
}
