# services.nico.switchGuard: the switch guard (docs/switch-guard.md). On a
# control-plane host a pre-switch check (nixpkgs' system.preSwitchChecks,
# which switch-to-configuration runs with the new toplevel and its action
# before it touches anything, unless NIXOS_NO_CHECK=1) asks the
# coordinator's leader for the switch slot and blocks until it is granted:
# however the switch is started (nixos-rebuild, colmena, deploy-rs, nico's
# own rollout), no two control-plane hosts switch at once, none switches
# while a membership change, rollout step or defragmentation holds the
# slot, and none while quorum would not hold with its member down. The
# running agent gives the slot back once it runs the new generation and
# its member is healthy (or the leader takes it back at the hold).
# NICO_SWITCH_GUARD=off in the switch's environment skips this check alone.
{ config, lib, ... }:

let
  inherit (lib) mkOption mkIf types;
  cfg = config.services.nico;
  sg = cfg.switchGuard;

  duration = types.strMatching "([0-9]+(\\.[0-9]+)?(ms|s|m|h))+" // {
    description = "Go duration (such as \"30s\" or \"15m\")";
  };
in
{
  options.services.nico.switchGuard = {
    enable = mkOption {
      type = types.bool;
      default = true;
      description = ''
        On a control-plane host, run `nico-agent switch-check` before every
        switch (`system.preSwitchChecks.nico-switch-guard`): the switch
        waits for the fleet's switch slot and is refused when etcd would
        lose quorum, when the new generation changes etcd's minor version
        (roll it with the EtcdCluster's `spec.version`), or when no
        coordinator answers and this host runs an etcd member. Set
        `NICO_SWITCH_GUARD=off` in a switch's environment to skip it once.
      '';
    };
    wait = mkOption {
      type = duration;
      default = "15m";
      description = "How long a switch waits for the slot before it is refused.";
    };
    answerTimeout = mkOption {
      type = duration;
      default = "30s";
      description = "How long a switch waits for a coordinator's first answer; with none, a host running an etcd member does not switch.";
    };
    hold = mkOption {
      type = types.nullOr duration;
      default = null;
      example = "20m";
      description = ''
        How long the slot stays held once granted, at most, before the
        leader takes it back (30s to 2h); null: 10m. A switch whose agent
        reports its member healthy on the new generation gives it back
        sooner.
      '';
    };
  };

  config = mkIf (cfg.enable && sg.enable && lib.elem "controlPlane" cfg.roles) {
    # The new generation's nico-agent and agent.yaml; "$1" "$2" are the
    # toplevel and the action switch-to-configuration passes.
    system.preSwitchChecks.nico-switch-guard = lib.concatStringsSep " " ([
      "${cfg.package}/bin/nico-agent" "switch-check"
      "--config" "${config.environment.etc."nico/agent.yaml".source}"
      "--wait" sg.wait "--answer-timeout" sg.answerTimeout
    ] ++ lib.optionals (sg.hold != null) [ "--hold" sg.hold ] ++ [ ''"$1"'' ''"$2"'' ]);
  };
}
