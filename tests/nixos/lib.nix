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
      # Every test VM also has QEMU's user-mode NIC (eth0, 10.0.2.15, the
      # default route) with the same address on every VM: gossip must
      # advertise the test network's address (eth1).
      settings.gossip.advertise = config.networking.primaryIPAddress;
    };
  };

  # A worker: no etcd member, joins the mesh through cp1.
  worker = { config, nodes, pkgs, ... }: {
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
      settings.gossip.advertise = config.networking.primaryIPAddress;
    };
  };

  # Python helpers shared by the test scripts. etcdctl names the local
  # member and root's certificate itself: the driver's shell has the
  # environment of the configuration the machine booted, which lacks the
  # module's ETCDCTL_* on a machine switched to nico later (self-join.nix).
  helpers = ''
    import json

    PKI = "/var/lib/nico/pki"
    ETCDCTL = (
        "etcdctl --endpoints https://127.0.0.1:2379"
        f" --cacert {PKI}/ca.crt --cert {PKI}/root.crt --key {PKI}/root.key"
    )

    def voters(machine) -> list[str] | None:
        """Names of the voting etcd members as the local member sees them,
        or None while it cannot answer (etcd not up yet)."""
        status, out = machine.execute(f"{ETCDCTL} member list")
        if status != 0:
            return None
        # id, status, name, peer URLs, client URLs, is learner
        return sorted(l.split(", ")[2] for l in out.strip().splitlines() if l.endswith(", false"))

    def wait_voters(machine, names: list[str], timeout: int = 600) -> None:
        """Waits until the voters are exactly names (retry: a check returns
        False while it fails; it must not raise)."""
        want = sorted(names)
        def ok(_last_try: bool) -> bool:
            got = voters(machine)
            print(f"{machine.name}: voters {got}, want {want}")
            return got == want
        # Positional: the keyword is timeout or timeout_seconds depending on
        # the driver's version.
        retry(ok, timeout)

    def coordinator_leader(machine) -> str:
        return json.loads(machine.succeed("nicoctl status -o json"))["coordinator"]
  '';
}
