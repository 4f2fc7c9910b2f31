# Declarations of the nixpkgs options the example flakes (examples/k3s,
# examples/kubernetes) set, for evaluating them with nixpkgs' `lib` alone
# (make nix-check): only the options the examples use, with nixpkgs' names,
# types and defaults (nixos/modules/services/cluster/k3s/default.nix and
# kubernetes/{default,apiserver,controller-manager,scheduler,kubelet,proxy}.nix).
# They declare; they implement nothing: no unit, no certificate, no k3s.
{ lib, k3sVersion }:
let
  inherit (lib) mkOption mkEnableOption types;
  str = default: mkOption { type = types.str; inherit default; };
  nullOrPath = mkOption { type = types.nullOr types.path; default = null; };
  extraOpts = mkOption { type = types.separatedString " "; default = ""; };
  kubeconfig = {
    server = mkOption { type = types.nullOr types.str; default = null; };
    caFile = nullOrPath;
    certFile = nullOrPath;
    keyFile = nullOrPath;
  };
in
{ config, ... }:
{
  options.services.k3s = {
    enable = mkEnableOption "k3s";
    package = mkOption {
      type = types.package;
      default = { type = "derivation"; name = "k3s-${k3sVersion}"; version = k3sVersion; outPath = "/nix/store/00000000000000000000000000000000-k3s-${k3sVersion}"; };
    };
    role = mkOption { type = types.enum [ "server" "agent" ]; default = "server"; };
    serverAddr = str "";
    clusterInit = mkOption { type = types.bool; default = false; };
    token = str "";
    tokenFile = nullOrPath;
    extraFlags = mkOption { type = types.either types.str (types.listOf types.str); default = [ ]; };
    disableAgent = mkOption { type = types.bool; default = false; };
    environmentFile = nullOrPath;
    configPath = nullOrPath;
  };

  options.services.kubernetes = {
    roles = mkOption { type = types.listOf (types.enum [ "master" "node" ]); default = [ ]; };
    easyCerts = mkOption { type = types.bool; default = false; };
    masterAddress = mkOption { type = types.str; };
    apiserverAddress = mkOption { type = types.str; };
    caFile = nullOrPath;
    apiserver = {
      enable = mkEnableOption "Kubernetes apiserver";
      advertiseAddress = mkOption { type = types.nullOr types.str; default = null; };
      etcd = {
        servers = mkOption { type = types.listOf types.str; default = [ "http://127.0.0.1:2379" ]; };
        keyFile = nullOrPath;
        certFile = nullOrPath;
        caFile = mkOption { type = types.nullOr types.path; default = config.services.kubernetes.caFile; };
      };
      clientCaFile = mkOption { type = types.nullOr types.path; default = config.services.kubernetes.caFile; };
      tlsCertFile = nullOrPath;
      tlsKeyFile = nullOrPath;
      serviceAccountKeyFile = mkOption { type = types.path; };
      serviceAccountSigningKeyFile = mkOption { type = types.path; };
      securePort = mkOption { type = types.int; default = 6443; };
      inherit extraOpts;
    };
    controllerManager = {
      enable = mkEnableOption "Kubernetes controller manager";
      serviceAccountKeyFile = nullOrPath;
      rootCaFile = mkOption { type = types.nullOr types.path; default = config.services.kubernetes.caFile; };
      inherit kubeconfig extraOpts;
    };
    scheduler = {
      enable = mkEnableOption "Kubernetes scheduler";
      inherit kubeconfig extraOpts;
    };
    kubelet = {
      enable = mkEnableOption "Kubernetes kubelet";
      inherit kubeconfig extraOpts;
    };
    proxy = {
      enable = mkEnableOption "Kubernetes proxy";
      inherit kubeconfig extraOpts;
    };
  };
}
