# 1. One control-plane host bootstraps, two more join by themselves: three
# voters.
#
# Proves: a bootstrap host's agent starts etcd (ETCD_INITIAL_CLUSTER_STATE
# new) and becomes its first voter; hosts with only seeds and a token join
# as learners, are promoted, and the agent (not multi-user.target) started
# their etcd.service; a coordinator is elected.
# Expected time under KVM: about 3 minutes (three VMs boot, two learners
# catch up and are promoted one after the other). An estimate, not
# measured: the machines this was written on have no KVM.
{ self, lib }:

let t = import ./lib.nix { inherit self lib; }; in
{
  name = "nico-bootstrap";
  nodes = {
    cp1 = t.controlPlane { bootstrap = true; };
    cp2 = t.controlPlane { };
    cp3 = t.controlPlane { };
  };
  testScript = t.helpers + ''
    cp1.start()
    cp1.wait_for_unit("nico-agent.service")
    cp1.wait_for_unit("etcd.service")
    wait_voters(cp1, ["cp1"])
    cp1.succeed("grep -qx ETCD_INITIAL_CLUSTER_STATE=new /run/nico/etcd.env")

    cp2.start()
    cp3.start()
    wait_voters(cp1, ["cp1", "cp2", "cp3"])
    for m in [cp2, cp3]:
        m.succeed("grep -qx ETCD_INITIAL_CLUSTER_STATE=existing /run/nico/etcd.env")
        # etcd.service is not started at boot: the agent started it.
        m.fail("systemctl is-enabled etcd.service")
    cp1.wait_until_succeeds("nicoctl status -o json | jq -e '.coordinator != \"\"'")
  '';
}
