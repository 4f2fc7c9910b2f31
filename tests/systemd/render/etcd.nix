# What nixpkgs' etcd module (nixos/modules/services/misc/etcd.nix) puts in
# systemd.services.etcd, users and tmpfiles for the options nico's module
# sets, written from reading that module: the unit's description,
# ordering, Environment= built from services.etcd.*, Documentation,
# Type=notify, Restart=always (RestartSec=30s), ExecStart of the package's
# etcd, User=etcd and LimitNOFILE. The stubs (tests/nixos/eval/stubs.nix)
# declare the options; their own stand-in unit is not used here.
# Options the stubs do not declare take nixpkgs' defaults: discovery "",
# extraConf { }, the package pkgs.etcd, the firewall enabled.
{ lib, pkgs }:
{ config, ... }:

let
  cfg = config.services.etcd;
  join = lib.concatStringsSep ",";
in
{
  options.networking.firewall.enable = lib.mkOption { type = lib.types.bool; default = true; };

  config = lib.mkIf cfg.enable {
    # nixpkgs' default initialCluster ("<name>=http://127.0.0.1:2380"); the
    # stubs' default is empty, and lists of equal priority concatenate.
    services.etcd.initialCluster = lib.mkOptionDefault [ "${cfg.name}=http://127.0.0.1:2380" ];

    # systemd.tmpfiles.settings."10-etcd", as NixOS renders it.
    environment.etc."tmpfiles.d/10-etcd.conf".text = "d '${cfg.dataDir}' 0700 etcd - - -\n";

    systemd.services.etcd = {
      description = "etcd key-value store";
      wantedBy = [ "multi-user.target" ];
      after = [ "network-online.target" ] ++ lib.optional config.networking.firewall.enable "firewall.service";
      wants = [ "network-online.target" ] ++ lib.optional config.networking.firewall.enable "firewall.service";
      environment = lib.filterAttrs (_: v: v != null) {
        ETCD_NAME = cfg.name;
        ETCD_DISCOVERY = "";
        ETCD_DATA_DIR = cfg.dataDir;
        ETCD_ADVERTISE_CLIENT_URLS = join cfg.advertiseClientUrls;
        ETCD_LISTEN_CLIENT_URLS = join cfg.listenClientUrls;
        ETCD_LISTEN_PEER_URLS = join cfg.listenPeerUrls;
        ETCD_INITIAL_ADVERTISE_PEER_URLS = join cfg.initialAdvertisePeerUrls;
        ETCD_PEER_CLIENT_CERT_AUTH = toString cfg.peerClientCertAuth;
        ETCD_PEER_TRUSTED_CA_FILE = cfg.peerTrustedCaFile;
        ETCD_PEER_CERT_FILE = cfg.peerCertFile;
        ETCD_PEER_KEY_FILE = cfg.peerKeyFile;
        ETCD_CLIENT_CERT_AUTH = toString cfg.clientCertAuth;
        ETCD_TRUSTED_CA_FILE = cfg.trustedCaFile;
        ETCD_CERT_FILE = cfg.certFile;
        ETCD_KEY_FILE = cfg.keyFile;
      } // {
        ETCD_INITIAL_CLUSTER = join cfg.initialCluster;
        ETCD_INITIAL_CLUSTER_STATE = cfg.initialClusterState;
        ETCD_INITIAL_CLUSTER_TOKEN = cfg.initialClusterToken;
      };
      unitConfig.Documentation = "https://github.com/coreos/etcd";
      serviceConfig = {
        Type = "notify";
        Restart = "always";
        RestartSec = "30s";
        ExecStart = "${pkgs.etcd}/bin/etcd";
        User = "etcd";
        LimitNOFILE = 40000;
      };
    };
  };
}
