# 4. Removal of a node while the coordinator leader's host crashes
# (crash()): another coordinator is elected and finishes the removal in
# flight. Four voters, so that one crashed host and one removal keep a
# healthy quorum.
#
# Proves: a removal filed with nicoctl survives the loss of the
# coordinator leader that took it (the next leader completes it); the
# removed node's agent exits 3 and systemd does not restart it
# (RestartPreventExitStatus), and its etcd stays stopped.
# Expected time under KVM: about 5 minutes (an estimate, not measured:
# the machines this was written on have no KVM).
{ self, lib }:

let t = import ./lib.nix { inherit self lib; }; in
{
  name = "nico-removal-and-leader-crash";
  nodes = {
    cp1 = t.controlPlane { bootstrap = true; };
    cp2 = t.controlPlane { };
    cp3 = t.controlPlane { };
    cp4 = t.controlPlane { };
  };
  testScript = t.helpers + ''
    # Not `machines`: the driver declares that name (a list of every machine).
    hosts = {"cp1": cp1, "cp2": cp2, "cp3": cp3, "cp4": cp4}
    cp1.start()
    wait_voters(cp1, ["cp1"])
    # Room for four voters: under the default spec.voters, three, cp4
    # would wait as a standby (docs/etcd-voters.md).
    cluster = {"apiVersion": "nico.homystack.io/v1", "kind": "EtcdCluster",
               "metadata": {"name": "etcd"}, "spec": {"voters": 5}}
    cp1.succeed(f"{ETCDCTL} put /nico/v1/etcdcluster '{json.dumps(cluster)}'")
    for m in [cp2, cp3, cp4]:
        m.start()
    wait_voters(cp1, ["cp1", "cp2", "cp3", "cp4"])

    leader = coordinator_leader(cp1)
    assert leader in hosts, f"no coordinator leader: {leader!r}"
    victim, observer = [n for n in sorted(hosts) if n != leader][:2]
    hosts[observer].succeed(f"nicoctl remove node {victim} --no-wait")
    hosts[leader].crash()

    obs = hosts[observer]
    obs.wait_until_succeeds(
        f"nicoctl status -o json | jq -e '.coordinator != \"\" and .coordinator != \"{leader}\"'", timeout=300)
    survivors = [n for n in hosts if n != victim]
    wait_voters(obs, survivors)
    # The removed node's agent exits 3 and is not restarted.
    hosts[victim].wait_until_succeeds(
        "systemctl show -p ExecMainStatus --value nico-agent.service | grep -qx 3", timeout=300)
    hosts[victim].fail("systemctl is-active etcd.service")
  '';
}
