# cluster.nix of the Kubernetes cluster prod, written by nico: do not edit.
# Schema version 3; check it with nico's lib.clusterSchema.load (nixos-module/lib/cluster-schema.nix).
{
  schemaVersion = 3;
  name = "prod";
  version = "1.37.2";
  controlPlaneEndpoint = { host = "10.0.0.10"; port = 6443; };
  firstServer = null;
  nodes = {
    controlPlane = [
      { name = "cp-1"; addresses = [ "10.0.0.1" "fd00::1" ]; }
      { name = "cp-2"; addresses = [ "10.0.0.2" ]; }
      { name = "cp-3"; addresses = [ "10.0.0.3" ]; }
    ];
    dataPlane = [
      { name = "worker-1"; addresses = [ "10.0.1.1" ]; }
      { name = "worker-2"; addresses = [ "worker-2.fleet.example" ]; }
    ];
  };
  etcd = {
    provider = "nico";
    endpoints = [ "https://10.0.0.1:2379" "https://10.0.0.2:2379" "https://10.0.0.3:2379" ];
    prefix = "/clusters/prod/registry";
  };
  components = {
    apiServer = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { "audit-log-path" = "/var/log/kube/audit.log"; "feature-gates" = "A=true,B=false"; "v" = "2"; };
      limits = { "CPUQuota" = "150%"; "MemoryMax" = "2147483648"; };
      external = null;
    };
    controllerManager = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { };
      limits = { "MemoryMax" = "536870912"; };
      external = null;
    };
    scheduler = {
      provider = "external";
      version = "1.37.2";
      extraArgs = { };
      limits = { };
      external = { url = "https://10.0.0.50:10259/healthz"; };
    };
    kubelet = {
      provider = "native";
      version = "1.37.2";
      extraArgs = { "max-pods" = "50"; };
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
