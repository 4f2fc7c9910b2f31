# cluster.nix of the Kubernetes cluster k3s, written by nico: do not edit.
# Schema version 3; check it with nico's lib.clusterSchema.load (nixos-module/lib/cluster-schema.nix).
{
  schemaVersion = 3;
  name = "k3s";
  version = "1.37.2";
  controlPlaneEndpoint = { host = "10.0.0.10"; port = 6443; };
  firstServer = null;
  nodes = {
    controlPlane = [
      { name = "cp-1"; addresses = [ "10.0.0.1" ]; }
      { name = "cp-2"; addresses = [ "10.0.0.2" ]; }
    ];
    dataPlane = [
      { name = "worker-1"; addresses = [ "10.0.1.1" ]; }
    ];
  };
  etcd = {
    provider = "nico";
    endpoints = [ "https://10.0.0.1:2379" "https://10.0.0.2:2379" ];
    prefix = null;
    proxy = { namespace = "/clusters/k3s/"; listen = { host = "127.0.0.1"; port = 2479; }; clientCommonName = "kubernetes:k3s"; };
  };
  components = {
    apiServer = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { };
      limits = { };
      external = null;
    };
    controllerManager = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { };
      limits = { };
      external = null;
    };
    scheduler = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { };
      limits = { };
      external = null;
    };
    kubelet = {
      provider = "native";
      version = "1.37.2";
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
