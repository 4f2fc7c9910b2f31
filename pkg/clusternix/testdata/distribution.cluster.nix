# cluster.nix of the Kubernetes cluster edge, written by nico: do not edit.
# Schema version 3; check it with nico's lib.clusterSchema.load (nixos-module/lib/cluster-schema.nix).
{
  schemaVersion = 3;
  name = "edge";
  version = "1.36";
  controlPlaneEndpoint = { host = "api.edge.example"; port = 6443; };
  firstServer = "s1";
  nodes = {
    controlPlane = [
      { name = "s1"; addresses = [ "192.168.1.1" ]; }
      { name = "s2"; addresses = [ "192.168.1.2" ]; }
      { name = "s3"; addresses = [ "192.168.1.3" ]; }
    ];
    dataPlane = [
      { name = "a1"; addresses = [ "192.168.1.11" ]; }
    ];
  };
  etcd = {
    provider = "distribution";
    endpoints = [ ];
    prefix = null;
  };
  components = {
    apiServer = {
      provider = "native";
      version = "1.36";
      extraArgs = { };
      limits = { };
      external = null;
    };
    controllerManager = {
      provider = "native";
      version = "1.36";
      extraArgs = { };
      limits = { };
      external = null;
    };
    scheduler = {
      provider = "native";
      version = "1.36";
      extraArgs = { };
      limits = { };
      external = null;
    };
    kubelet = {
      provider = "native";
      version = "1.36";
      extraArgs = { };
      limits = { };
      external = null;
    };
  };
  paths = {
    apiserverCert = "/etc/kubernetes/pki/apiserver.crt";
    apiserverEtcdClientCert = "/etc/kubernetes/pki/apiserver-etcd-client.crt";
    apiserverEtcdClientKey = "/etc/kubernetes/pki/apiserver-etcd-client.key";
    apiserverKey = "/etc/kubernetes/pki/apiserver.key";
    bootstrapKubeconfig = "/etc/kubernetes/bootstrap-kubelet.conf";
    bootstrapToken = "/var/lib/nico/cluster/bootstrap-token";
    caCert = "/etc/kubernetes/pki/ca.crt";
    caKey = "/etc/kubernetes/pki/ca.key";
    etcdCACert = "/etc/kubernetes/pki/etcd/ca.crt";
    frontProxyCACert = "/etc/kubernetes/pki/front-proxy-ca.crt";
    frontProxyCAKey = "/etc/kubernetes/pki/front-proxy-ca.key";
    joinToken = "/var/lib/nico/cluster/join-token";
    kubeconfig = "/etc/kubernetes/admin.conf";
    machineSSHKey = "/var/lib/nico/cluster/machine-ssh-key";
    serviceAccountKey = "/etc/kubernetes/pki/sa.key";
    serviceAccountPub = "/etc/kubernetes/pki/sa.pub";
  };
}
