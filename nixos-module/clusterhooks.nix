# The typed options of the agent's `drain.*` and `kubeconfigPublish.*`
# settings: how this control-plane machine's agent runs a
# KubernetesCluster's drain hook and publishes a distribution's own
# kubeconfig. The agent refuses what these types refuse
# (pkg/config/clusterhooks.go); null leaves the agent's default.
{ lib }:

let
  inherit (lib) mkOption types;

  absPath = types.strMatching "/.*" // { description = "absolute path"; };

  # A Go duration of whole units; the agent checks its bounds (1s to 1h).
  duration = types.strMatching "([0-9]+(\\.[0-9]+)?(ms|s|m|h))+" // {
    description = "Go duration from 1s to 1h (such as \"30s\" or \"2m\")";
  };
in
{
  drain = {
    kubeconfig = mkOption {
      type = types.nullOr absPath;
      default = null;
      example = "/etc/kubernetes/drain.conf";
      description = ''
        `KUBECONFIG` this machine's agent gives a KubernetesCluster's
        `spec.drain.command` when the cluster names no
        `spec.kubeconfig.path`; null: the admin kubeconfig nico delivers
        (`/etc/kubernetes/admin.conf`).
      '';
    };
    resync = mkOption {
      type = types.nullOr duration;
      default = null;
      example = "1m";
      description = "How often this machine's agent re-reads the drain requests it runs, besides watching them; null: 30s.";
    };
    outputTail = mkOption {
      type = types.nullOr (types.ints.between 256 65536);
      default = null;
      example = 8192;
      description = "How many of the last bytes of a drain command's output (standard output and error) this machine's agent keeps in the drain request's status and the `MachinesDrained` condition; null: 2048.";
    };
  };
  kubeconfigPublish.interval = mkOption {
    type = types.nullOr duration;
    default = null;
    example = "30s";
    description = ''
      How often this machine's agent re-reads a distribution's own
      kubeconfig (the cluster's `spec.kubeconfig.path`) and publishes it,
      with its server rewritten, when it changed; null: 10s.
    '';
  };
}
