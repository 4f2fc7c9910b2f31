# 5. A hypervisor host provisions one VM through libvirt.
#
# OPTIONAL: not in the flake's `checks` (so not run by `nix flake check`);
# run it with `nix build .#vmTests.vm-hypervisor` (the flake's
# legacyPackages.<system>.vmTests). It runs a QEMU guest inside the test
# VM. With nested virtualisation on the build host (kvm_intel or kvm_amd
# loaded with nested=1) libvirt defines the domain as type kvm; without it,
# the agent falls back to type qemu (TCG emulation, pkg/libvirt), which
# works but is slow, and some builders forbid it. Nested virtualisation is
# what makes it optional.
#
# One host, hv, is the whole fleet: control plane (bootstrap) and
# hypervisor. The module enables libvirtd and defines the storage pool
# `default` (services.nico.hypervisor.storagePools); the test adds an
# isolated libvirt network and an empty 1 GiB base image, applies a
# MachinePool of one machine with nicoctl, and checks that the agent
# defined and started the domain through libvirt: a copy-on-write overlay
# of the base image, nico's metadata, the machine's first-boot identity in
# SMBIOS OEM strings, and the machine Running in nicoctl. The base image
# holds no operating system, so the guest never boots an agent: a guest
# that joins the fleet is covered by tests/integration/machinepool_test.go
# on libvirt's test driver, not here.
#
# Proves: the module's hypervisor role (libvirtd, the storage pool unit,
# the agent built with libvirt) lets the agent define and start a pool's
# machine as a libvirt domain.
# Expected time under KVM with nested virtualisation: about 3 minutes (one
# VM boots, bootstraps etcd, and libvirt starts a guest). An estimate, not
# measured: the machines this was written on have no KVM.
{ self, lib }:

let t = import ./lib.nix { inherit self lib; }; in
{
  name = "nico-hypervisor";
  nodes.hv = { config, pkgs, ... }: {
    imports = [ (t.controlPlane { bootstrap = true; }) ];
    virtualisation.memorySize = lib.mkForce 2048;
    virtualisation.cores = 2;
    # The storage pool lives on the root file system: room for the
    # guest's overlay (the agent reports a pool's free GiB).
    virtualisation.diskSize = 4096;
    services.nico = {
      roles = lib.mkForce [ "controlPlane" "hypervisor" ];
      hypervisor.storagePools.default = "/var/lib/libvirt/images";
      settings.hypervisor.labels = [ "test=vm" ];
    };
    environment.systemPackages = [ config.virtualisation.libvirtd.qemu.package pkgs.libxml2 ];
    environment.etc."nico-test/network.xml".text = ''
      <network>
        <name>nico</name>
        <bridge name="virbr-nico" stp="on" delay="0"/>
      </network>
    '';
    environment.etc."nico-test/pool.json".text = builtins.toJSON {
      apiVersion = "nico.homystack.io/v1";
      kind = "MachinePool";
      metadata.name = "web";
      spec = {
        count = 1;
        hostSelector.test = "vm";
        template = {
          vcpus = 1;
          memoryMiB = 128;
          diskGiB = 1;
          storagePool = "default";
          baseImage = "base.qcow2";
          network = "nico";
          roles = [ "worker" ];
        };
      };
    };
  };

  testScript = t.helpers + ''
    # Not `machines`: the driver declares that name (a list of every machine).
    def pool_machines() -> list:
        return json.loads(hv.succeed("nicoctl pool machines web -o json"))

    start_all()
    with subtest("fleet of one: hv is a voter, libvirtd and its storage pool are up"):
        wait_voters(hv, ["hv"])
        hv.wait_for_unit("libvirtd.service")
        hv.wait_for_unit("nico-libvirt-pools.service")
        hv.succeed("virsh pool-info default | grep -q 'State: *running'")
        hv.succeed("virsh pool-info default | grep -q 'Autostart: *yes'")

    with subtest("a network and a base image for the pool"):
        hv.succeed("virsh net-define /etc/nico-test/network.xml && virsh net-start nico")
        hv.succeed("qemu-img create -f qcow2 /var/lib/libvirt/images/base.qcow2 1G && virsh pool-refresh default")
        # The agent reports them in its hypervisors/ record (read every
        # hypervisor.resync, 5 s).
        hv.wait_until_succeeds(
            f"{ETCDCTL} get --print-value-only /nico/v1/hypervisors/hv"
            " | jq -e '(.status.images | index(\"default/base.qcow2\")) and (.status.networks | index(\"nico\"))'",
            timeout=120)

    with subtest("nicoctl pool apply: the agent defines and starts one domain"):
        hv.succeed("nicoctl pool apply -f /etc/nico-test/pool.json")
        hv.wait_until_succeeds(
            "nicoctl pool machines web -o json | jq -e 'length == 1 and .[0].status.phase == \"Running\"'", timeout=300)
        m = pool_machines()[0]
        name = m["metadata"]["name"]
        assert m["spec"]["host"] == "hv", m
        hv.succeed(f"virsh domstate {name} | grep -qx running")
        assert hv.succeed("virsh list --all --name").split() == [name]

    with subtest("the domain: overlay of the base image, nico's metadata, first-boot identity"):
        xml = hv.succeed(f"virsh dumpxml {name}")
        assert "https://homystack.io/nico/domain/1" in xml, xml
        assert f"io.systemd.credential:nico.name={name}" in xml, xml
        vol = hv.succeed(f"virsh dumpxml {name} | xmllint --xpath 'string(//disk/source/@volume)' -").strip()
        assert vol.startswith("nico-"), vol
        hv.succeed(f"virsh vol-dumpxml --pool default {vol} | grep -q '/var/lib/libvirt/images/base.qcow2'")
        print("domain type: " + hv.succeed(f"virsh dumpxml {name} | xmllint --xpath 'string(/domain/@type)' -"))
  '';
}
