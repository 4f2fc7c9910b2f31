# The few packages and pkgs.formats.yaml that nixos-module/ uses, as
# stand-ins that need no nixpkgs: derivation-shaped attribute sets with a
# store path. formats.yaml's `generate` keeps the value it was given
# (passthru `value`) so checks can read the rendered YAML's contents; YAML
# is a superset of JSON, and `text` is that JSON.
{ lib }:

let
  fakeDrv = name: extra: {
    type = "derivation";
    inherit name;
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
  } // extra;

  yamlValue = with lib.types; nullOr (oneOf [ bool int float str path (attrsOf yamlValue) (listOf yamlValue) ]) // {
    description = "YAML value";
  };
in
{
  nico = fakeDrv "nico-dev" { withLibvirt = false; };
  nico-hypervisor = fakeDrv "nico-hypervisor-dev" { withLibvirt = true; };
  etcd = fakeDrv "etcd-3.6" { };
  coreutils = fakeDrv "coreutils-9" { };
  systemd = fakeDrv "systemd-257" { };
  bash = fakeDrv "bash-5" { };
  git = fakeDrv "git-2" { };
  nix = fakeDrv "nix-2" { };
  libvirt = fakeDrv "libvirt-11" { };
  writeShellScript = name: text: fakeDrv name { inherit text; };
  writeText = name: text: fakeDrv name { inherit text; };
  python3 = fakeDrv "python3-3" { };
  curl = fakeDrv "curl-8" { };
  jq = fakeDrv "jq-1" { };
  libxml2 = fakeDrv "libxml2-2" { };
  qemu = fakeDrv "qemu-10" { };
  stdenv.hostPlatform.system = "x86_64-linux";
  testers.runNixOSTest = test: { inherit test; };
  formats.yaml = { }: {
    type = yamlValue;
    generate = name: value: fakeDrv name { inherit value; text = builtins.toJSON value; };
  };
}
