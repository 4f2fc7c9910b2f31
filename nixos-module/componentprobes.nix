# The typed options of the agent's `componentProbes.*` settings: where
# this control-plane machine's agent probes its own Kubernetes components
# when they do not answer where the KubernetesCluster's `spec.probes` says.
# The agent refuses what these types refuse (pkg/config/componentprobes.go).
{ lib }:

let
  inherit (lib) mkOption types;

  # http or https, a host, a port, any path (the agent checks the rest).
  url = types.nullOr (types.strMatching "https?://([^/@:]+|\\[[0-9a-fA-F:]+]):[0-9]+(/.*)?" // {
    description = "http or https URL with a host and a port";
  });

  option = { component, cluster, example }: mkOption {
    type = url;
    default = null;
    inherit example;
    description = ''
      URL at which this machine's agent probes its own ${component},
      instead of the KubernetesCluster's `spec.probes.${cluster}.url`;
      null keeps the cluster's. Set it when the component listens
      elsewhere than the cluster's probe URL on this machine.
    '';
  };
in
{
  options = {
    apiServerURL = option { component = "kube-apiserver (`/readyz`, checked with the cluster CA)"; cluster = "apiServer"; example = "https://10.0.0.11:6443/readyz"; };
    controllerManagerURL = option { component = "kube-controller-manager (`/healthz`)"; cluster = "controllerManager"; example = "https://10.0.0.11:10257/healthz"; };
    schedulerURL = option { component = "kube-scheduler (`/healthz`)"; cluster = "scheduler"; example = "https://10.0.0.11:10259/healthz"; };
  };
}
