# 3. A rolling update to a new generation where one node's new generation
# fails its health check: that node rolls itself back and the rollout halts.
#
# Nodes: cp1 (control plane, bootstrap, runs the coordinator) and two
# workers, w1 and w2. The rollout goes data plane first, one node at a
# time in name order (pkg/rollout), so w1 rolls, then w2, then cp1.
#
# Nothing is built inside the VMs. The agents use the exec applier
# (generations.applier = "exec"): its command switches to a specialisation
# built with the VM, named by the rollout's ref ("v2"), under a transient
# systemd unit as the nixos applier does (pkg/apply/nixos.go). The nixos
# applier itself cannot run here: it fetches the flake with git and runs
# `nix build` of its toplevel, which needs nixpkgs and network inside the VM.
# Its fetch/build steps are covered by pkg/apply's unit tests; the
# activation, health gate and rollback steps below are the same for both
# appliers.
#
# Every node runs a small HTTP "app" serving /etc/nico-vm-app, and the agents'
# health check (generations.httpChecks) asks for its /healthz. Specialisation
# v2 adds /etc/nico-vm-app/version = v2; on w2 it also removes healthz, so
# the switch succeeds but the health gate fails within
# generations.healthDeadline (20 s): w2's agent switches back to the booted
# system, reports the generation Failed, and the coordinator halts the
# rollout at w2 before cp1 is touched.
#
# Proves: a rollout goes one node at a time; a generation failing its
# health gate is rolled back by that node's agent and halts the rollout
# before the nodes after it.
# Expected time under KVM: about 3 minutes (three VMs boot in parallel,
# cp1 bootstraps, then one good switch, one 20 s health deadline and a
# rollback). An estimate, not measured: the machines this was written on
# have no KVM.
{ self, lib }:

let
  t = import ./lib.nix { inherit self lib; };

  # Common to all three nodes: the app, the exec applier and its health check.
  rolling = broken: { config, pkgs, ... }: {
    system.switch.enable = true;
    environment.systemPackages = [ pkgs.curl pkgs.jq ];
    environment.etc."nico-vm-app/healthz".text = "ok\n";
    environment.etc."nico-vm-app/version".text = "v1\n";
    systemd.services.nico-vm-app = {
      wantedBy = [ "multi-user.target" ];
      serviceConfig.ExecStart = "${pkgs.python3}/bin/python3 -m http.server 8080 --bind 127.0.0.1 --directory /etc/nico-vm-app";
    };
    services.nico.settings.generations = {
      applier = "exec";
      command = [ "${switchCommand pkgs}" ];
      healthDeadline = "20s";
      httpChecks = [ "http://127.0.0.1:8080/healthz" ];
    };
    specialisation.v2.configuration = {
      environment.etc."nico-vm-app/version".text = lib.mkForce "v2\n";
      # The broken generation: the app runs, but is not healthy.
      environment.etc."nico-vm-app/healthz".enable = lib.mkIf broken false;
    };
  };

  # The exec applier's command (pkg/apply/exec.go): NICO_ACTION is apply or
  # rollback, NICO_REF the rollout's ref (absent when rolling back to
  # nothing). It switches to /run/booted-system's specialisation of that
  # name, or to the booted system itself.
  switchCommand = pkgs: pkgs.writeShellScript "nico-vm-switch" ''
    set -eu
    ref=''${NICO_REF:-}
    target=/run/booted-system
    if [ -n "$ref" ]; then target=/run/booted-system/specialisation/$ref; fi
    [ -x "$target/bin/switch-to-configuration" ] || { echo "no system for ref '$ref'" >&2; exit 1; }
    exec systemd-run --unit="nico-vm-$NICO_ACTION-$NICO_GENERATION" --wait --collect --quiet \
      --property=Type=oneshot "$target/bin/switch-to-configuration" test
  '';
in
{
  name = "nico-rollout-halts";
  nodes = {
    cp1 = { imports = [ (t.controlPlane { bootstrap = true; }) (rolling false) ]; };
    w1 = { imports = [ t.worker (rolling false) ]; };
    w2 = { imports = [ t.worker (rolling true) ]; };
  };
  testScript = t.helpers + ''
    def rollout(name):
        return json.loads(cp1.succeed(f"nicoctl rollout status {name} -o json"))

    def version(m):
        return m.succeed("curl -sf http://127.0.0.1:8080/version").strip()

    start_all()
    with subtest("fleet up: cp1 a voter, w1 and w2 registered"):
        wait_voters(cp1, ["cp1"])
        cp1.wait_until_succeeds(
            "nicoctl get nodes -o json | jq -e '[.[].metadata.name] | sort == [\"cp1\", \"w1\", \"w2\"]'", timeout=300)
        for m in [cp1, w1, w2]:
            m.wait_for_unit("nico-vm-app.service")
            m.wait_until_succeeds("curl -sf http://127.0.0.1:8080/healthz")
            assert version(m) == "v1"

    with subtest("rollout v2: w1 switches, w2 fails its health check and rolls back"):
        cp1.succeed("nicoctl rollout start v2 --git-repo https://git.invalid/fleet --ref v2 --step-timeout 5m")
        cp1.wait_until_succeeds(
            "nicoctl rollout status v2 -o json | jq -e '.status.phase == \"Halted\"'", timeout=600)
        r = rollout("v2")
        print(json.dumps(r["status"], indent=2))
        assert r["status"]["haltedNode"] == "w2", r["status"]
        assert "failed on w2" in r["status"]["haltedReason"], r["status"]
        phases = {n["name"]: n.get("phase", "") for n in r["status"]["nodes"]}
        assert [n["name"] for n in r["status"]["nodes"]] == ["w1", "w2", "cp1"], phases
        assert phases["w1"] == "Done", phases
        # cp1 was never started: the rollout halted before it.
        assert phases["cp1"] == "", phases

    with subtest("w1 runs v2; w2 is back on the booted system and healthy; cp1 untouched"):
        assert version(w1) == "v2"
        w2.wait_until_succeeds("curl -sf http://127.0.0.1:8080/healthz")
        assert version(w2) == "v1"
        w2.succeed("test \"$(readlink -f /run/current-system)\" = \"$(readlink -f /run/booted-system)\"")
        # Its agent ran the rollback unit after the apply unit.
        w2.succeed("journalctl -b -u nico-agent.service | grep -q 'generation failed'")
        assert version(cp1) == "v1"
        cp1.succeed("test \"$(readlink -f /run/current-system)\" = \"$(readlink -f /run/booted-system)\"")

    with subtest("a halted rollout starts no new step"):
        cp1.sleep(15)
        assert rollout("v2")["status"]["phase"] == "Halted"
        assert version(cp1) == "v1"
  '';
}
