# Declarations of the NixOS options that nixos-module/ sets, for evaluating
# the module with nixpkgs' `lib` alone (make nix-check): the build machines
# have no nixpkgs. Names, types and defaults follow nixpkgs
# (nixos/modules/services/misc/etcd.nix, system/boot/systemd.nix,
# misc/assertions.nix, services/networking/firewall.nix,
# virtualisation/libvirtd.nix, config/system-path.nix, config/nix.nix); services.etcd also sets its unit as
# nixpkgs' module does, so that the overrides of nico's module are checked.
{ lib, pkgs }:
{ config, ... }:

let
  inherit (lib) mkOption types;

  # nixpkgs' unitOption, without its list-merging subtleties.
  unitOption = types.oneOf [ types.bool types.int types.str types.path (types.listOf (types.oneOf [ types.bool types.int types.str types.path ])) ];

  serviceModule = {
    options = {
      description = mkOption { type = types.str; default = ""; };
      wantedBy = mkOption { type = types.listOf types.str; default = [ ]; };
      requiredBy = mkOption { type = types.listOf types.str; default = [ ]; };
      wants = mkOption { type = types.listOf types.str; default = [ ]; };
      requires = mkOption { type = types.listOf types.str; default = [ ]; };
      after = mkOption { type = types.listOf types.str; default = [ ]; };
      before = mkOption { type = types.listOf types.str; default = [ ]; };
      partOf = mkOption { type = types.listOf types.str; default = [ ]; };
      path = mkOption { type = types.listOf (types.either types.package types.str); default = [ ]; };
      environment = mkOption { type = types.attrsOf (types.nullOr (types.oneOf [ types.str types.path types.package ])); default = { }; };
      restartIfChanged = mkOption { type = types.bool; default = true; };
      reloadTriggers = mkOption { type = types.listOf unitOption; default = [ ]; };
      restartTriggers = mkOption { type = types.listOf unitOption; default = [ ]; };
      stopIfChanged = mkOption { type = types.bool; default = true; };
      unitConfig = mkOption { type = types.attrsOf unitOption; default = { }; };
      serviceConfig = mkOption { type = types.attrsOf unitOption; default = { }; };
    };
  };
in
{
  options = {
    assertions = mkOption { type = types.listOf types.unspecified; default = [ ]; internal = true; };
    warnings = mkOption { type = types.listOf types.str; default = [ ]; internal = true; };

    networking.hostName = mkOption { type = types.strMatching "^$|^[[:alnum:]]([[:alnum:]_-]{0,61}[[:alnum:]])?$"; default = "nixos"; };
    networking.interfaces = mkOption {
      type = types.attrsOf (types.submodule {
        options.ipv4.addresses = mkOption {
          type = types.listOf (types.submodule {
            options.address = mkOption { type = types.str; };
            options.prefixLength = mkOption { type = types.ints.between 0 32; };
          });
          default = [ ];
        };
      });
      default = { };
    };
    networking.firewall.allowedTCPPorts = mkOption { type = types.listOf types.port; default = [ ]; };
    networking.firewall.allowedUDPPorts = mkOption { type = types.listOf types.port; default = [ ]; };

    environment.variables = mkOption { type = types.attrsOf (types.either types.str (types.listOf types.str)); default = { }; };
    environment.systemPackages = mkOption { type = types.listOf types.package; default = [ ]; };
    environment.etc = mkOption {
      type = types.attrsOf (types.submodule ({ name, config, ... }: {
        options = {
          enable = mkOption { type = types.bool; default = true; };
          text = mkOption { type = types.nullOr types.lines; default = null; };
          source = mkOption { type = types.unspecified; };
        };
        config.source = lib.mkIf (config.text != null) (lib.mkDefault (pkgs.writeText name config.text));
      }));
      default = { };
    };

    # Options the VM tests' nodes set (nixos/modules/virtualisation/qemu-vm.nix,
    # nixos/lib/testing/network.nix, system/activation/specialisation.nix,
    # system/activation/switchable-system.nix).
    networking.primaryIPAddress = mkOption { type = types.str; default = ""; };
    virtualisation.memorySize = mkOption { type = types.ints.positive; default = 1024; };
    virtualisation.cores = mkOption { type = types.ints.positive; default = 1; };
    virtualisation.diskSize = mkOption { type = types.nullOr types.ints.positive; default = 1024; };
    virtualisation.libvirtd.qemu.package = mkOption { type = types.package; default = pkgs.qemu; };
    system.switch.enable = mkOption { type = types.bool; default = false; };
    # system/activation/pre-switch-check.nix (its `apply` adds the script).
    system.preSwitchChecks = mkOption { type = types.attrsOf types.str; default = { }; };
    system.configurationRevision = mkOption { type = types.nullOr types.str; default = null; };
    specialisation = mkOption {
      type = types.attrsOf (types.submodule {
        options.inheritParentConfig = mkOption { type = types.bool; default = true; };
        options.configuration = mkOption { type = types.deferredModule; default = { }; };
      });
      default = { };
    };

    virtualisation.libvirtd.enable = mkOption { type = types.bool; default = false; };
    virtualisation.libvirtd.package = mkOption { type = types.package; default = pkgs.libvirt; };

    nix.package = mkOption { type = types.package; default = pkgs.nix; };

    systemd.package = mkOption { type = types.package; default = pkgs.systemd; };
    systemd.services = mkOption { type = types.attrsOf (types.submodule serviceModule); default = { }; };
    systemd.tmpfiles.rules = mkOption { type = types.listOf types.str; default = [ ]; };

    services.etcd = {
      enable = mkOption { type = types.bool; default = false; };
      name = mkOption { type = types.str; default = "nixos"; };
      advertiseClientUrls = mkOption { type = types.listOf types.str; default = [ "https://127.0.0.1:2379" ]; };
      listenClientUrls = mkOption { type = types.listOf types.str; default = [ "https://127.0.0.1:2379" ]; };
      listenPeerUrls = mkOption { type = types.listOf types.str; default = [ "https://127.0.0.1:2380" ]; };
      initialAdvertisePeerUrls = mkOption { type = types.listOf types.str; default = [ "https://127.0.0.1:2380" ]; };
      initialCluster = mkOption { type = types.listOf types.str; default = [ ]; };
      initialClusterState = mkOption { type = types.enum [ "new" "existing" ]; default = "new"; };
      initialClusterToken = mkOption { type = types.str; default = "etcd-cluster"; };
      certFile = mkOption { type = types.nullOr types.path; default = null; };
      keyFile = mkOption { type = types.nullOr types.path; default = null; };
      trustedCaFile = mkOption { type = types.nullOr types.path; default = null; };
      peerCertFile = mkOption { type = types.nullOr types.path; default = config.services.etcd.certFile; };
      peerKeyFile = mkOption { type = types.nullOr types.path; default = config.services.etcd.keyFile; };
      peerTrustedCaFile = mkOption { type = types.nullOr types.path; default = config.services.etcd.trustedCaFile; };
      clientCertAuth = mkOption { type = types.bool; default = false; };
      peerClientCertAuth = mkOption { type = types.bool; default = false; };
      dataDir = mkOption { type = types.path; default = "/var/lib/etcd"; };
    };
  };

  # As nixpkgs' etcd module: an enabled etcd is wanted by
  # multi-user.target and reads its settings from Environment=.
  config = lib.mkIf config.services.etcd.enable {
    systemd.services.etcd = {
      description = "etcd key-value store";
      wantedBy = [ "multi-user.target" ];
      after = [ "network.target" ];
      environment = {
        ETCD_NAME = config.services.etcd.name;
        ETCD_DATA_DIR = config.services.etcd.dataDir;
        ETCD_INITIAL_CLUSTER = lib.concatStringsSep "," config.services.etcd.initialCluster;
        ETCD_INITIAL_CLUSTER_STATE = config.services.etcd.initialClusterState;
        ETCD_LISTEN_CLIENT_URLS = lib.concatStringsSep "," config.services.etcd.listenClientUrls;
        ETCD_CLIENT_CERT_AUTH = toString config.services.etcd.clientCertAuth;
        ETCD_PEER_CLIENT_CERT_AUTH = toString config.services.etcd.peerClientCertAuth;
      } // lib.filterAttrs (_: v: v != null) {
        ETCD_CERT_FILE = config.services.etcd.certFile;
        ETCD_KEY_FILE = config.services.etcd.keyFile;
        ETCD_TRUSTED_CA_FILE = config.services.etcd.trustedCaFile;
        ETCD_PEER_CERT_FILE = config.services.etcd.peerCertFile;
        ETCD_PEER_KEY_FILE = config.services.etcd.peerKeyFile;
        ETCD_PEER_TRUSTED_CA_FILE = config.services.etcd.peerTrustedCaFile;
      };
      serviceConfig = {
        Type = "notify";
        ExecStart = "${pkgs.etcd}/bin/etcd";
        User = "etcd";
        LimitNOFILE = 40000;
      };
    };
  };
}
