# This machine's part of the cluster cluster.nix describes, with nixpkgs'
# services.kubernetes: the API server, controller-manager and scheduler on
# a control-plane machine, the kubelet and kube-proxy on every machine. The
# certificates and keys are the ones nico delivers (kubeadm's layout), the
# datastore nico's etcd under the cluster's prefix (or an external one).
#
# No services.kubernetes.roles: the components are enabled one by one, so
# the module neither runs an etcd of its own nor issues certificates
# (easyCerts). The control-plane components authenticate with the
# kubeconfig nico delivers to control-plane machines (paths.kubeconfig); a
# production flake gives each its own client certificate.
#
# Every kubelet joins the standard way (TLS bootstrapping): it starts with
# the bootstrap kubeconfig nico delivers (paths.bootstrapKubeconfig: the
# endpoint, the cluster CA and the cluster's bootstrap token, which nico
# registers in the cluster), files a CSR for its client certificate, which
# the controller-manager approves and signs with the cluster CA, writes
# its own kubeconfig (kubeletKubeconfig) and renews the certificate before
# it expires (--rotate-certificates). A data-plane machine gets no other
# credential; kube-proxy runs with its kubelet's. The kubelet keeps its
# credentials only while the delivered cluster CA is the one they were
# issued under: a machine released by one cluster and claimed by another
# (or a cluster made anew under the same name) starts with the bootstrap
# kubeconfig again, the old cluster's certificate removed.
#
# Each component (cluster.nix components: the KubernetesCluster's
# spec.controlPlane.components and spec.dataPlane.kubelet) runs here when
# its provider is native (cluster.runs), with its extraArgs after the flags
# below (cluster.componentArgs; nico refuses the flags it owns) and its
# limits on its unit (cluster.componentLimits: CPUQuota, MemoryMax). An
# external component is not run. Every component runs from the one
# services.kubernetes.package: a component version other than the
# cluster's fails an assertion naming it.
{ lib, pkgs, cluster, machine, ... }:
let
  p = cluster.paths;
  cp = machine.role == "controlPlane";
  # The extra flags of component name, quoted for the unit's command line.
  extra = name: lib.optionalString (cluster.componentArgs name != [ ]) " ${lib.escapeShellArgs (cluster.componentArgs name)}";
  # The units of the components this machine runs, by component.
  units = lib.filterAttrs (name: _: cluster.runs name) ({ kubelet = "kubelet"; }
    // lib.optionalAttrs cp { apiServer = "kube-apiserver"; controllerManager = "kube-controller-manager"; scheduler = "kube-scheduler"; });
  kubeconfigFlag = "--kubeconfig=${p.kubeconfig}";
  # What the kubelet writes once its CSR is signed, and where its
  # certificates live; kubeletCA is the CA they were issued under.
  kubeletKubeconfig = "/var/lib/kubelet/kubeconfig";
  kubeletPKI = "/var/lib/kubelet/pki";
  kubeletCA = "/var/lib/kubelet/nico-ca.crt";
in
{
  assertions = [{
    assertion = cluster.etcd.provider != "distribution";
    message = "examples/kubernetes: nixpkgs' services.kubernetes has no datastore of its own; the KubernetesCluster ${cluster.name} has etcd.provider distribution: use nico or external";
  } {
    assertion = cluster.etcdProxy == null;
    message = "examples/kubernetes: the KubernetesCluster ${cluster.name} has spec.etcd.namespace (cluster.nix etcd.proxy), for distributions that cannot set an etcd prefix; kube-apiserver sets --etcd-prefix: leave spec.etcd.namespace out";
  }] ++ map (name: {
    assertion = cluster.components.${name}.version == cluster.version;
    message = "examples/kubernetes: the KubernetesCluster ${cluster.name} asks for ${name} ${cluster.components.${name}.version} beside Kubernetes ${cluster.version}, but this flake runs every component from one services.kubernetes.package: give ${name} a package of its own, or leave its version out";
  }) (lib.attrNames units);

  services.kubernetes = {
    roles = [ ];
    easyCerts = false;
    masterAddress = cluster.controlPlaneEndpoint.host;
    apiserverAddress = cluster.serverURL;
    caFile = p.caCert;

    apiserver = lib.mkIf (cp && cluster.runs "apiServer") {
      enable = true;
      advertiseAddress = machine.address;
      etcd = {
        servers = cluster.etcd.endpoints;
        caFile = p.etcdCACert;
        certFile = p.apiserverEtcdClientCert;
        keyFile = p.apiserverEtcdClientKey;
      };
      clientCaFile = p.caCert;
      tlsCertFile = p.apiserverCert;
      tlsKeyFile = p.apiserverKey;
      serviceAccountKeyFile = p.serviceAccountPub;
      serviceAccountSigningKeyFile = p.serviceAccountKey;
      # --shutdown-send-retry-after: during a graceful shutdown, clients
      # are told to retry (on another API server) instead of failing.
      # --etcd-compaction-interval=0 on nico's etcd: it is the fleet's and
      # nico compacts it (its EtcdCluster's spec.policy); the API servers
      # must not (their default is every 5 minutes, every key).
      # --enable-bootstrap-token-auth: kubelets join with the bootstrap
      # token; --kubelet-preferred-address-types: logs and exec reach the
      # kubelets by address.
      extraOpts = lib.concatStringsSep " " ([ "--requestheader-client-ca-file=${p.frontProxyCACert}" "--shutdown-send-retry-after=true"
        "--enable-bootstrap-token-auth=true" "--kubelet-preferred-address-types=InternalIP,Hostname" ]
        ++ lib.optional (cluster.etcd.prefix != null) "--etcd-prefix=${cluster.etcd.prefix}"
        ++ lib.optional (cluster.etcd.provider == "nico") "--etcd-compaction-interval=0")
        + extra "apiServer";
    };

    # A later --kubeconfig wins over the one the module writes.
    controllerManager = lib.mkIf (cp && cluster.runs "controllerManager") {
      enable = true;
      serviceAccountKeyFile = p.serviceAccountKey;
      rootCaFile = p.caCert;
      # Signs the kubelets' CSRs with the cluster CA; approves those of
      # the bootstrap token's group and of nodes renewing their own
      # (csrapproving, with nico's bindings); tokencleaner deletes expired
      # bootstrap tokens.
      extraOpts = "${kubeconfigFlag} --cluster-signing-cert-file=${p.caCert} --cluster-signing-key-file=${p.caKey} --controllers=*,bootstrapsigner,tokencleaner${extra "controllerManager"}";
    };
    scheduler = lib.mkIf (cp && cluster.runs "scheduler") { enable = true; extraOpts = kubeconfigFlag + extra "scheduler"; };

    # A later --kubeconfig wins over the one the module writes.
    kubelet = lib.mkIf (cluster.runs "kubelet") {
      enable = true;
      extraOpts = "--bootstrap-kubeconfig=${p.bootstrapKubeconfig} --kubeconfig=${kubeletKubeconfig} --rotate-certificates=true --cert-dir=${kubeletPKI}${extra "kubelet"}";
    };
    proxy = { enable = true; extraOpts = "--kubeconfig=${kubeletKubeconfig}"; };
  };

  # Each component's limits on its unit. On a control-plane machine the
  # others start after the API server (systemd orders the units a switch
  # restarts by After=): a generation that changes several components
  # brings the API server up first, then the controller-manager, the
  # scheduler and the kubelet.
  systemd.services = lib.mkMerge [
    (lib.mapAttrs' (name: unit: lib.nameValuePair unit {
      serviceConfig = cluster.componentLimits name;
      after = lib.optional (name != "apiServer" && units ? apiServer) "kube-apiserver.service";
    }) units)
    (lib.mkIf (cluster.runs "kubelet") {
      # Credentials of another cluster: removed, so the kubelet joins
      # this one with the bootstrap kubeconfig.
      kubelet.preStart = lib.mkAfter ''
        if ! ${pkgs.diffutils}/bin/cmp -s ${p.caCert} ${kubeletCA}; then
          rm -rf ${kubeletKubeconfig} ${kubeletPKI}
          install -m 0644 ${p.caCert} ${kubeletCA}
        fi
      '';
    })
  ];

  networking.firewall.allowedTCPPorts = [ 10250 ] ++ lib.optional cp 6443;
}
