# Hosts for the VM tests: nico with its systemd etcd runtime, etcd on the
# host's test-network address, cp1 the bootstrap host and the seed of the
# others.
{ self, lib }:

let
  # A test token; on real hosts it is a secret outside the store.
  token = { environment.etc."nico-token".text = "vmtest.0123456789abcdef"; };

  # etcd's URLs. The scripts reach etcd through etcdctl and nicoctl with
  # the ETCDCTL_* and NICO_* variables the module sets, so they need no
  # change when etcd runs with TLS (https, the agent's certificates).
  scheme = "https";
in
{
  controlPlane = { bootstrap ? false }: { config, nodes, pkgs, ... }: {
    imports = [ self.nixosModules.default token ];
    virtualisation.memorySize = 1024;
    environment.systemPackages = [ pkgs.etcd pkgs.jq ];
    services.nico = {
      enable = true;
      roles = [ "controlPlane" ];
      inherit bootstrap;
      seeds = lib.optional (!bootstrap) nodes.cp1.networking.primaryIPAddress;
      tokenFile = "/etc/nico-token";
      openFirewall = true;
      settings.etcd = {
        peerURL = "${scheme}://${config.networking.primaryIPAddress}:2380";
        clientURL = "${scheme}://${config.networking.primaryIPAddress}:2379";
        endpoints = lib.optional (!bootstrap) "${scheme}://${nodes.cp1.networking.primaryIPAddress}:2379";
      };
      settings.heartbeat.ttl = "5s";
    };
  };

  # A worker: no etcd member, joins the mesh through cp1.
  worker = { nodes, pkgs, ... }: {
    imports = [ self.nixosModules.default token ];
    virtualisation.memorySize = 768;
    environment.systemPackages = [ pkgs.jq pkgs.curl ];
    services.nico = {
      enable = true;
      roles = [ "worker" ];
      seeds = [ nodes.cp1.networking.primaryIPAddress ];
      tokenFile = "/etc/nico-token";
      openFirewall = true;
      settings.etcd.endpoints = [ "${scheme}://${nodes.cp1.networking.primaryIPAddress}:2379" ];
      settings.heartbeat.ttl = "5s";
    };
  };

  # Python helpers shared by the test scripts.
  helpers = ''
    import json

    def voters(machine):
        """Names of the voting etcd members, as the local member sees them."""
        out = machine.succeed("etcdctl member list")
        # id, status, name, peer URLs, client URLs, is learner
        return sorted(l.split(", ")[2] for l in out.strip().splitlines() if l.endswith(", false"))

    def wait_voters(machine, names, timeout=600):
        want = sorted(names)
        def ok(_):
            got = voters(machine)
            print(f"{machine.name}: voters {got}, want {want}")
            return got == want
        retry(ok, timeout_seconds=timeout)

    def coordinator_leader(machine):
        return json.loads(machine.succeed("nicoctl status -o json"))["coordinator"]
  '';
}
