# 4. Removal of a node while the coordinator leader's host crashes
# (crash()): another coordinator is elected and finishes the removal in
# flight. Four voters, so that one crashed host and one removal keep a
# healthy quorum. About 5 minutes on a machine with KVM (an estimate, not
# measured: the machine this was written on has no KVM and no nixpkgs).
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
    machines = {"cp1": cp1, "cp2": cp2, "cp3": cp3, "cp4": cp4}
    cp1.start()
    wait_voters(cp1, ["cp1"])
    for m in [cp2, cp3, cp4]:
        m.start()
    wait_voters(cp1, ["cp1", "cp2", "cp3", "cp4"])

    leader = coordinator_leader(cp1)
    assert leader in machines, f"no coordinator leader: {leader!r}"
    victim, observer = [n for n in sorted(machines) if n != leader][:2]
    machines[observer].succeed(f"nicoctl remove node {victim} --no-wait")
    machines[leader].crash()

    obs = machines[observer]
    obs.wait_until_succeeds(
        f"nicoctl status -o json | jq -e '.coordinator != \"\" and .coordinator != \"{leader}\"'", timeout=300)
    survivors = [n for n in machines if n != victim]
    wait_voters(obs, survivors)
    # The removed node's agent exits 3 and is not restarted.
    machines[victim].wait_until_succeeds(
        "systemctl show -p ExecMainStatus --value nico-agent.service | grep -qx 3", timeout=300)
    machines[victim].fail("systemctl is-active etcd.service")
  '';
}
