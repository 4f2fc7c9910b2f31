# cluster.nix of the Kubernetes cluster lab, written by nico: do not edit.
# Schema version 3; check it with nico's lib.clusterSchema.load (nixos-module/lib/cluster-schema.nix).
{
  schemaVersion = 3;
  name = "lab";
  version = "1.37.0";
  controlPlaneEndpoint = { host = "fd00::10"; port = 443; };
  firstServer = null;
  nodes = {
    controlPlane = [
      { name = "solo"; addresses = [ "fd00::10" ]; }
    ];
    dataPlane = [ ];
  };
  etcd = {
    provider = "external";
    endpoints = [ "http://etcd.lab.example:2379" "https://[fd00::20]:2379" ];
    prefix = null;
  };
  components = {
    apiServer = {
      provider = "native";
      version = "1.37.0";
      extraArgs = { };
      limits = { };
      external = null;
    };
    controllerManager = {
      provider = "native";
      version = "1.37.0";
      extraArgs = { };
      limits = { };
      external = null;
    };
    scheduler = {
      provider = "native";
      version = "1.37.0";
      extraArgs = { };
      limits = { };
      external = null;
    };
    kubelet = {
      provider = "native";
      version = "1.37.0";
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
    joinToken = "/run/keys/k8s/join-token";
    kubeconfig = "/etc/rancher/k3s/k3s.yaml";
    machineSSHKey = "/var/lib/nico/cluster/machine-ssh-key";
    serviceAccountKey = "/etc/kubernetes/pki/sa.key";
    serviceAccountPub = "/etc/kubernetes/pki/sa.pub";
  };
}
