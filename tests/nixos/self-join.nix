# 2. Self-join by switching: cp2 boots without nico; the test switches it
# to a specialisation that enables services.nico (built with the VM, so
# nothing is built inside it), and it becomes a voter.
#
# Proves: `switch-to-configuration` of a configuration that enables nico
# on a running host starts the agent, which joins the cluster by itself
# (the path of `nixos-rebuild switch`). etcdctl on cp2 afterwards names
# its endpoints and certificates (lib.nix's ETCDCTL): the driver's shell
# keeps the environment cp2 booted with, without ETCDCTL_*.
# Expected time under KVM: about 2 minutes (an estimate, not measured:
# the machines this was written on have no KVM).
{ self, lib }:

let t = import ./lib.nix { inherit self lib; }; in
{
  name = "nico-self-join";
  nodes = {
    cp1 = t.controlPlane { bootstrap = true; };
    # No nico in the boot configuration; the specialisation adds it.
    cp2 = { pkgs, ... }: {
      virtualisation.memorySize = 1024;
      system.switch.enable = true;
      environment.systemPackages = [ pkgs.etcd ];
      specialisation.nico.configuration = t.controlPlane { };
    };
  };
  testScript = t.helpers + ''
    start_all()
    wait_voters(cp1, ["cp1"])
    cp2.wait_for_unit("multi-user.target")
    cp2.fail("systemctl cat nico-agent.service")

    cp2.succeed("/run/current-system/specialisation/nico/bin/switch-to-configuration test")
    cp2.wait_for_unit("nico-agent.service")
    wait_voters(cp1, ["cp1", "cp2"])
    wait_voters(cp2, ["cp1", "cp2"])
  '';
}
