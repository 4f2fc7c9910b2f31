# services.nico: the nico agent (and, on control-plane hosts, the
# coordinator and the local etcd member) on a NixOS host.
#
# `services.nico.enable = true` plus `nixos-rebuild switch` is all a host
# needs to join the fleet: the agent registers the machine, and on a
# control-plane host asks the coordinator to add its etcd member as a
# learner, writes the initial-cluster values it returns to an
# EnvironmentFile and starts etcd.service through systemd's D-Bus API
# (the agent's `systemd` runtime). This module only configures nixpkgs'
# services.etcd; it never starts etcd by itself.
{ config, lib, pkgs, ... }:

let
  inherit (lib) mkOption mkEnableOption mkIf mkMerge mkDefault types literalExpression;

  cfg = config.services.nico;
  settingsFormat = pkgs.formats.yaml { };

  isControlPlane = lib.elem "controlPlane" cfg.roles;
  isHypervisor = lib.elem "hypervisor" cfg.roles;

  # Where the agent writes etcd's initial-cluster values; etcd.service reads
  # it (EnvironmentFile= takes precedence over the unit's Environment=).
  etcdEnvFile = "/run/nico/etcd.env";

  # The port of an http(s)://host:port URL, as an integer.
  portOf = url: lib.toInt (lib.last (lib.splitString ":" url));

  # The agent's gossip.port is a string key; 7946 is its default.
  gossipPort = lib.toInt (toString (cfg.settings.gossip.port or 7946));

  agentConfigFile = settingsFormat.generate "nico-agent.yaml" cfg.settings;
  coordinatorConfigFile = settingsFormat.generate "nico-coordinator.yaml" cfg.coordinator.settings;

  # A token must be read from a file at run time: a Nix path or a store
  # path would put the secret in the world-readable Nix store.
  tokenInStore = cfg.tokenFile != null
    && (builtins.isPath cfg.tokenFile || lib.hasPrefix builtins.storeDir (toString cfg.tokenFile));

  tlsOption = what: mkOption {
    type = types.nullOr types.str;
    default = null;
    example = "/run/keys/etcd/${what}";
    description = "Passed to services.etcd as the ${what} (a path read at run time, not copied to the store).";
  };
in
{
  options.services.nico = {
    enable = mkEnableOption "nico, the agent that makes this host join the fleet and its etcd cluster";

    package = mkOption {
      type = types.package;
      default = pkgs.nico;
      defaultText = literalExpression "pkgs.nico";
      description = "The nico package (nico-agent, nico-coordinator, nicoctl).";
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
      description = "Open the gossip port (TCP and UDP) and, on control-plane hosts, etcd's peer and client ports.";
    };

    etcd = {
      certFile = tlsOption "client certificate";
      keyFile = tlsOption "client key";
      trustedCaFile = tlsOption "client CA";
      peerCertFile = tlsOption "peer certificate";
      peerKeyFile = tlsOption "peer key";
      peerTrustedCaFile = tlsOption "peer CA";
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
          options.etcd.endpoints = mkOption {
            type = types.nonEmptyListOf types.str;
            default = [ cfg.settings.etcd.clientURL ];
            defaultText = literalExpression "[ config.services.nico.settings.etcd.clientURL ]";
            description = "Client URLs of the etcd cluster; the local member by default.";
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
          etcd.peerURL = "http://10.0.0.1:2380";
          etcd.clientURL = "http://10.0.0.1:2379";
          etcd.endpoints = [ "http://10.0.0.2:2379" ];
          log.level = "debug";
        }
      '';
      type = types.submodule {
        freeformType = settingsFormat.type;
        options = {
          name = mkOption {
            type = types.strMatching "[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?";
            default = config.networking.hostName;
            defaultText = literalExpression "config.networking.hostName";
            description = "This machine's name in nico, a DNS label.";
          };
          dataDir = mkOption {
            type = types.str;
            default = "/var/lib/nico";
            description = "The agent's state directory.";
          };
          etcd.peerURL = mkOption {
            type = types.strMatching "https?://[^/]+:[0-9]+";
            default = "http://127.0.0.1:2380";
            example = "http://10.0.0.1:2380";
            description = "URL on which this host's etcd member talks to its peers (listened on and advertised).";
          };
          etcd.clientURL = mkOption {
            type = types.strMatching "https?://[^/]+:[0-9]+";
            default = "http://127.0.0.1:2379";
            example = "http://10.0.0.1:2379";
            description = "URL on which this host's etcd member serves clients (advertised; etcd also listens on 127.0.0.1:2379).";
          };
          etcd.endpoints = mkOption {
            type = types.listOf types.str;
            default = [ ];
            description = "Client URLs of the running etcd cluster; required on hosts that do not bootstrap.";
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
          assertion = !tokenInStore;
          message = "services.nico.tokenFile (${toString cfg.tokenFile}) is in the Nix store, or a Nix path that would be copied there, readable by every user: give the path of a file outside the store as a string, such as \"/run/keys/nico-token\".";
        }
        {
          assertion = !(cfg.settings ? token || cfg.settings ? gossip && cfg.settings.gossip ? key);
          message = "services.nico.settings holds a secret (token or gossip.key), which would be written to the Nix store: put it in a file and set services.nico.tokenFile.";
        }
      ];

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
          etcd.environmentFile = mkDefault etcdEnvFile;
          etcd.dataDir = mkDefault config.services.etcd.dataDir;
        })
      ];

      # For operators: the configuration the agent runs with.
      environment.etc."nico/agent.yaml".source = agentConfigFile;

      systemd.services.nico-agent = {
        description = "nico agent: keeps this host in the fleet";
        wantedBy = [ "multi-user.target" ];
        wants = [ "network-online.target" ];
        after = [ "network-online.target" ] ++ lib.optional isHypervisor "libvirtd.service";
        requires = lib.optional isHypervisor "libvirtd.service";
        # The agent applies new generations itself (switch-to-configuration):
        # restarting it from inside that activation would kill the
        # activation in progress. The new agent takes over when the agent
        # restarts itself once the generation is healthy, or at next boot.
        restartIfChanged = false;
        path = [ config.systemd.package ];
        serviceConfig = {
          Type = "notify";
          NotifyAccess = "main";
          WatchdogSec = "30s";
          ExecStart = "${cfg.package}/bin/nico-agent --config ${agentConfigFile}";
          Restart = "on-failure";
          RestartSec = "5s";
          # 3: this node was removed from the cluster; starting again
          # would rejoin it at once.
          RestartPreventExitStatus = "3";
          StateDirectory = "nico";
          StateDirectoryMode = "0700";
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
        name = cfg.settings.name;
        listenPeerUrls = [ cfg.settings.etcd.peerURL ];
        initialAdvertisePeerUrls = [ cfg.settings.etcd.peerURL ];
        listenClientUrls = lib.unique [ cfg.settings.etcd.clientURL "http://127.0.0.1:2379" ];
        advertiseClientUrls = [ cfg.settings.etcd.clientURL ];
        initialClusterToken = cfg.settings.etcd.clusterToken;
        certFile = cfg.etcd.certFile;
        keyFile = cfg.etcd.keyFile;
        trustedCaFile = cfg.etcd.trustedCaFile;
        peerCertFile = cfg.etcd.peerCertFile;
        peerKeyFile = cfg.etcd.peerKeyFile;
        peerTrustedCaFile = cfg.etcd.peerTrustedCaFile;
      };

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
          # The agent wipes the data dir of a removed member (keeping a
          # copy); recreate it for the etcd user before each start.
          ExecStartPre = "+${pkgs.coreutils}/bin/install -d -m 0700 -o etcd -g etcd ${config.services.etcd.dataDir}";
        };
      };
    })

    (mkIf cfg.coordinator.enable {
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
          Restart = "always";
          RestartSec = "5s";
          DynamicUser = true;
          ProtectSystem = "strict";
          ProtectHome = true;
          PrivateTmp = true;
          PrivateDevices = true;
          NoNewPrivileges = true;
          ProtectKernelTunables = true;
          ProtectKernelModules = true;
          ProtectControlGroups = true;
          RestrictAddressFamilies = [ "AF_INET" "AF_INET6" "AF_UNIX" ];
          LockPersonality = true;
          MemoryDenyWriteExecute = true;
          SystemCallArchitectures = "native";
        };
      };
    })

    (mkIf isHypervisor {
      virtualisation.libvirtd.enable = true;
      systemd.services.nico-agent.serviceConfig.SupplementaryGroups = [ "libvirtd" ];
    })

    (mkIf cfg.openFirewall {
      networking.firewall.allowedTCPPorts =
        [ gossipPort ]
        ++ lib.optionals isControlPlane [ (portOf cfg.settings.etcd.peerURL) (portOf cfg.settings.etcd.clientURL) ];
      networking.firewall.allowedUDPPorts = [ gossipPort ];
    })
  ]);
}
