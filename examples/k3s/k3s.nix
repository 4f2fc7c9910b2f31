# This machine's part of the k3s cluster cluster.nix describes: a server on
# a control-plane machine, an agent on a data-plane one.
#
#   etcd.provider nico or external: every server stores its data in that
#     etcd (--datastore-endpoint, with the certificates nico delivers) and
#     needs no other server to start; agents join through the endpoint.
#   etcd.provider distribution: k3s's embedded etcd; the first server
#     initialises it (clusterInit), nico starts the other servers one at a
#     time and they join the first.
{ config, lib, cluster, machine, ... }:
let
  p = cluster.paths;
  server = machine.role == "controlPlane";
  sharedEtcd = cluster.etcd.provider != "distribution";
  # nico's etcd is the fleet's: nico compacts it (spec.policy of its
  # EtcdCluster), so the API servers must not (their default is every 5
  # minutes, to their own latest revision, for every key of the fleet).
  nicoEtcd = cluster.etcd.provider == "nico";
in
{
  services.k3s = {
    enable = true;
    role = if server then "server" else "agent";
    tokenFile = p.joinToken;
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
      ++ lib.optional (server && nicoEtcd) "--kube-apiserver-arg=etcd-compaction-interval=0"
      ++ lib.optionals (server && sharedEtcd) ([
        "--datastore-endpoint=${cluster.etcdServers}"
        "--datastore-cafile=${p.etcdCACert}"
        "--datastore-certfile=${p.apiserverEtcdClientCert}"
        "--datastore-keyfile=${p.apiserverEtcdClientKey}"
      ] ++ lib.optional (cluster.etcd.prefix != null) "--kube-apiserver-arg=etcd-prefix=${cluster.etcd.prefix}");
  };

  assertions = [{
    assertion = lib.versions.majorMinor config.services.k3s.package.version == lib.versions.majorMinor cluster.version;
    message = "examples/k3s: services.k3s.package is k3s ${config.services.k3s.package.version}, but the KubernetesCluster ${cluster.name} asks for Kubernetes ${cluster.version} (spec.version); pick the matching pkgs.k3s_1_NN";
  }];

  networking.firewall.allowedTCPPorts = [ 10250 ]
    ++ lib.optional server 6443 # the API server and supervisor
    ++ lib.optionals (server && !sharedEtcd) [ 2379 2380 ];
  networking.firewall.allowedUDPPorts = [ 8472 ]; # flannel's VXLAN
}
