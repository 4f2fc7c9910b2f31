# 1. One control-plane host bootstraps, two more join by themselves: three
# voters. About 3 minutes on a machine with KVM (three VMs boot, two
# learners catch up and are promoted one after the other); an estimate,
# not measured: the machine this was written on has no KVM and no nixpkgs.
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
