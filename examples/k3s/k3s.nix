# This machine's part of the k3s cluster cluster.nix describes: a server on
# a control-plane machine, an agent on a data-plane one.
#
#   etcd.provider nico or external: every server stores its data in that
#     etcd (--datastore-endpoint, with the certificates nico delivers) and
#     needs no other server to start; agents join through the endpoint.
#   etcd.provider nico needs the KubernetesCluster's spec.etcd.namespace:
#     k3s cannot set an etcd key prefix (it writes /bootstrap/<hash> and
#     /registry/...), so cluster.nix has etcd.proxy and every server runs
#     nico-etcd-proxy on loopback, which puts each key under
#     /clusters/<name>/ and talks to nico's etcd as the cluster's etcd
#     identity; k3s's --datastore-endpoint is that proxy. Without it (an
#     etcd.prefix instead) this module refuses the cluster (assertion):
#     k3s would write outside the prefix its etcd role reaches.
#   etcd.provider distribution: k3s's embedded etcd; the first server
#     initialises it (clusterInit), nico starts the other servers one at a
#     time and they join the first.
#
# Servers share the join token (paths.joinToken, control-plane machines
# only): k3s's server token, which also keys the data it keeps encrypted
# in its datastore and never changes. Agents join with the cluster's
# bootstrap token (paths.bootstrapToken), which nico registers in the
# cluster as a kube-system bootstrap-token Secret and rotates before it
# expires: k3s accepts such a token for agents, and an agent holds no
# server credential.
#
# Components (cluster.nix components): k3s runs the API server,
# controller-manager, scheduler and kubelet of a machine in its one
# process. An external control-plane component is turned off
# (--disable-apiserver, --disable-controller-manager, --disable-scheduler);
# each one's extraArgs go through --kube-apiserver-arg, ... and
# --kubelet-arg; the limits bound k3s.service by the sum of its native
# components' (a limit only when every one of them sets it). Every
# component runs at the k3s package's version: one of another version
# fails an assertion naming it.
{ config, lib, cluster, machine, ... }:
let
  p = cluster.paths;
  server = machine.role == "controlPlane";
  sharedEtcd = cluster.etcd.provider != "distribution";
  # nico's etcd is the fleet's: nico compacts it (spec.policy of its
  # EtcdCluster), so the API servers must not (their default is every 5
  # minutes, to their own latest revision, for every key of the fleet).
  nicoEtcd = cluster.etcd.provider == "nico";
  # The namespacing proxy (cluster.nix etcd.proxy), or null.
  proxy = cluster.etcdProxy;
  datastore =
    if proxy != null then proxy.datastore
    else { endpoint = cluster.etcdServers; cafile = p.etcdCACert; certfile = p.apiserverEtcdClientCert; keyfile = p.apiserverEtcdClientKey; };
  # k3s's flag for each component's arguments and for turning it off.
  k3sFlag = { apiServer = "kube-apiserver"; controllerManager = "kube-controller-manager"; scheduler = "kube-scheduler"; kubelet = "kubelet"; };
  # The components k3s runs on this machine: the kubelet everywhere, the
  # control plane on servers.
  here = [ "kubelet" ] ++ lib.optionals server [ "apiServer" "controllerManager" "scheduler" ];
  native = lib.filter cluster.runs here;
  componentFlags =
    lib.concatMap (name: map (a: "--${k3sFlag.${name}}-arg=${lib.removePrefix "--" a}") (cluster.componentArgs name)) native
    ++ map (name: "--disable-${lib.removePrefix "kube-" k3sFlag.${name}}") (lib.filter (name: name != "kubelet" && !cluster.runs name) here);
  # A percentage with at most one decimal ("150%", "0.5%") in tenths.
  tenths = q: let parts = lib.splitString "." (lib.removeSuffix "%" q); in
    lib.toInt (lib.head parts) * 10 + (if lib.length parts > 1 then lib.toInt (lib.substring 0 1 (lib.elemAt parts 1)) else 0);
  fromTenths = t: "${toString (t / 10)}${lib.optionalString (lib.mod t 10 != 0) ".${toString (lib.mod t 10)}"}%";
  limitsOf = map cluster.componentLimits native;
  everyOne = k: native != [ ] && lib.all (l: l ? ${k}) limitsOf;
  unitLimits =
    lib.optionalAttrs (everyOne "CPUQuota") { CPUQuota = fromTenths (lib.foldl' (n: l: n + tenths l.CPUQuota) 0 limitsOf); }
    // lib.optionalAttrs (everyOne "MemoryMax") { MemoryMax = toString (lib.foldl' (n: l: n + lib.toInt l.MemoryMax) 0 limitsOf); };
in
{
  services.k3s = {
    enable = true;
    role = if server then "server" else "agent";
    tokenFile = if server then p.joinToken else p.bootstrapToken;
    clusterInit = server && !sharedEtcd && machine.isFirstServer;
    serverAddr =
      if !server then cluster.serverURL
      else if sharedEtcd || machine.isFirstServer then ""
      else cluster.url cluster.firstServerMachine.address 6443; # the first server's supervisor
    extraFlags = [ "--node-name=${machine.name}" ]
      ++ lib.optionals server [
        "--tls-san=${cluster.controlPlaneEndpoint.host}"
        "--write-kubeconfig-mode=0600"
        # During a graceful shutdown, answer with Retry-After so that
        # clients go to another API server instead of failing.
        "--kube-apiserver-arg=shutdown-send-retry-after=true"
      ]
      ++ componentFlags
      ++ lib.optional (server && nicoEtcd) "--kube-apiserver-arg=etcd-compaction-interval=0"
      ++ lib.optionals (server && sharedEtcd) ([
        "--datastore-endpoint=${datastore.endpoint}"
        "--datastore-cafile=${datastore.cafile}"
        "--datastore-certfile=${datastore.certfile}"
        "--datastore-keyfile=${datastore.keyfile}"
      ] ++ lib.optional (cluster.etcd.prefix != null) "--kube-apiserver-arg=etcd-prefix=${cluster.etcd.prefix}");
  };

  systemd.services.k3s.serviceConfig = unitLimits;

  # On a server of a cluster on nico's etcd: the namespacing proxy k3s's
  # datastore endpoint names, from nico's package, before k3s.
  systemd.services.nico-etcd-proxy = lib.mkIf (server && proxy != null) {
    description = "nico's namespacing etcd proxy for the k3s cluster ${cluster.name}";
    wantedBy = [ "multi-user.target" ];
    requiredBy = [ "k3s.service" ];
    before = [ "k3s.service" ];
    wants = [ "network-online.target" ];
    after = [ "network-online.target" ];
    serviceConfig = {
      ExecStart = "${config.services.nico.package}/bin/nico-etcd-proxy ${lib.escapeShellArgs proxy.args}";
      Restart = "always";
      RestartSec = "2s";
    };
  };

  assertions = [{
    assertion = nicoEtcd -> proxy != null;
    message = "examples/k3s: the KubernetesCluster ${cluster.name} is on nico's etcd with a key prefix (${toString cluster.etcd.prefix}), which k3s cannot set: it would write /bootstrap and /registry outside its etcd role; set spec.etcd.namespace: true (the namespacing proxy), or use etcd.provider distribution";
  } {
    assertion = lib.versions.majorMinor config.services.k3s.package.version == lib.versions.majorMinor cluster.version;
    message = "examples/k3s: services.k3s.package is k3s ${config.services.k3s.package.version}, but the KubernetesCluster ${cluster.name} asks for Kubernetes ${cluster.version} (spec.version); pick the matching pkgs.k3s_1_NN";
  }] ++ map (name: {
    assertion = cluster.components.${name}.version == cluster.version;
    message = "examples/k3s: the KubernetesCluster ${cluster.name} asks for ${name} ${cluster.components.${name}.version} beside Kubernetes ${cluster.version}, but k3s runs every component at its own version: leave ${name}'s version out";
  }) native;

  networking.firewall.allowedTCPPorts = [ 10250 ]
    ++ lib.optional server 6443 # the API server and supervisor
    ++ lib.optionals (server && !sharedEtcd) [ 2379 2380 ];
  networking.firewall.allowedUDPPorts = [ 8472 ]; # flannel's VXLAN
}
