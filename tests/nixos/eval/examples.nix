# Evaluates the example flakes examples/k3s and examples/kubernetes with
# nixpkgs' lib alone (make nix-check): each example's outputs.nix (what its
# flake.nix returns) is called with the cluster.nix files pkg/clusternix
# renders (its golden files, pkg/clusternix/testdata), so every
# nixosConfigurations.<machine> loads cluster.nix through the real schema
# (nixos-module/lib/cluster-schema.nix) and evaluates the example's module
# and nico's real module for EVERY machine of each sample. nixpkgs is a
# stand-in: lib.nixosSystem is lib.evalModules over stubs.nix (the options
# nico's module sets) and example-stubs.nix (services.k3s and
# services.kubernetes declared, not implemented), so what is checked is the
# value each example sets, not what k3s or kube-apiserver does with it.
#
# copies (tests/nixos/nix-check.sh passes it): a directory holding a copy of
# each example with a sample beside its flake.nix as cluster.nix, as nico
# writes it (copySample: k3s on nico's etcd goes through the namespacing
# proxy), to evaluate flake.nix itself with a cluster.nix.
{ lib, copies ? null }:

let
  pkgs = import ./pkgs.nix { inherit lib; };
  schema = import ../../../nixos-module/lib/cluster-schema.nix;
  samples = lib.genAttrs [ "nico-ha" "nico-namespaced" "distribution" "external-single" ]
    (name: ../../../pkg/clusternix/testdata + "/${name}.cluster.nix");
  clusterOf = sample: schema.load samples.${sample};

  # nixpkgs as the examples use it; k3sVersion is the stub package's.
  nixpkgsWith = k3sVersion: {
    lib = lib // {
      nixosSystem = { system, modules, specialArgs ? { } }: lib.evalModules {
        inherit specialArgs;
        modules = [
          (import ./stubs.nix { inherit lib pkgs; })
          (import ./example-stubs.nix { inherit lib k3sVersion; })
          { _module.args.pkgs = pkgs; }
        ] ++ modules;
      };
    };
  };
  # nico's flake as the examples use it: the schema and the module.
  nico = { lib.clusterSchema = schema; nixosModules.default = ../../../nixos-module; };

  outputsWith = { example, sample, k3sVersion ? (clusterOf sample).version, nicoFlake ? nico }:
    import (../../../examples + "/${example}/outputs.nix") {
      nixpkgs = nixpkgsWith k3sVersion;
      nico = nicoFlake;
      clusterFile = samples.${sample};
    };

  failedAssertions = cfg: map (a: a.message) (lib.filter (a: !a.assertion) cfg.assertions);
  hasPrefix = p: s: lib.hasPrefix p s;

  # forMachines returns, for every machine of sample, the named checks f makes.
  forMachines = example: sample: f:
    let
      out = outputsWith { inherit example sample; };
      c = clusterOf sample;
    in
    {
      "${example}/${sample}: nixosConfigurations are the cluster's machines and minimal" =
        lib.attrNames out.nixosConfigurations == lib.sort lib.lessThan (c.machineNames ++ [ "minimal" ]);
      "${example}/${sample}: minimal runs nico's agent and no Kubernetes" =
        let m = out.nixosConfigurations.minimal.config; in
        m.systemd.services ? nico-agent && !m.services.k3s.enable && !m.services.kubernetes.kubelet.enable;
    } // lib.foldl' (acc: name:
      let
        cfg = out.nixosConfigurations.${name}.config;
        m = c.machine name;
      in
      acc // lib.mapAttrs' (check: ok: lib.nameValuePair "${example}/${sample}/${name}: ${check}" ok) (f {
        inherit cfg m c name;
        server = m.role == "controlPlane";
        shared = c.etcd.provider != "distribution";
      } // {
        "host name, nico's agent, no failed assertion" =
          cfg.networking.hostName == name && cfg.systemd.services ? nico-agent && failedAssertions cfg == [ ];
      })) { } c.machineNames;

  k3s = { cfg, m, c, name, server, shared }:
    let
      k = cfg.services.k3s;
      has = f: lib.elem f k.extraFlags;
    in
    {
      "k3s server on the control plane, agent on the data plane" = k.enable && k.role == (if server then "server" else "agent");
      "tokenFile: servers cluster.nix's paths.joinToken, agents paths.bootstrapToken" =
        k.tokenFile == (if server then c.paths.joinToken else c.paths.bootstrapToken) && k.token == "";
      "clusterInit exactly on the first server with embedded etcd" = k.clusterInit == (server && !shared && c.firstServer == name);
      "serverAddr: agents the endpoint, joining servers the first one, others none" =
        k.serverAddr == (if !server then c.serverURL else if shared || c.firstServer == name then ""
          else "https://${lib.head (lib.head (lib.filter (n: n.name == c.firstServer) c.nodes.controlPlane)).addresses}:6443")
        && (!server -> hasPrefix "https://" k.serverAddr);
      "--datastore-endpoint and its certificates on servers with an external etcd" =
        c.etcd.provider == "external" -> lib.all (f: has f == server) [
          "--datastore-endpoint=${lib.concatStringsSep "," c.etcd.endpoints}"
          "--datastore-cafile=${c.paths.etcdCACert}"
          "--datastore-certfile=${c.paths.apiserverEtcdClientCert}"
          "--datastore-keyfile=${c.paths.apiserverEtcdClientKey}"
        ];
      "on nico's etcd, servers' --datastore-endpoint is the loopback proxy, trusted by the cluster CA, with the cluster's etcd identity" =
        c.etcd.provider == "nico" -> lib.all (f: has f == server) [
          "--datastore-endpoint=https://${c.etcd.proxy.listen.host}:${toString c.etcd.proxy.listen.port}"
          "--datastore-cafile=${c.paths.caCert}"
          "--datastore-certfile=${c.paths.apiserverEtcdClientCert}"
          "--datastore-keyfile=${c.paths.apiserverEtcdClientKey}"
        ];
      "nico-etcd-proxy runs on servers on nico's etcd (only there), from nico's package, before k3s, with cluster.nix's namespace, endpoints and files" =
        let
          svc = cfg.systemd.services.nico-etcd-proxy;
          exec = svc.serviceConfig.ExecStart;
          x = c.etcd.proxy;
        in
        (cfg.systemd.services ? nico-etcd-proxy) == (server && c.etcd.provider == "nico")
        && (server && c.etcd.provider == "nico" ->
          hasPrefix "${cfg.services.nico.package}/bin/nico-etcd-proxy " exec
          && lib.all (a: lib.hasInfix a exec) [
            "'--namespace=${x.namespace}'" "'--endpoints=${lib.concatStringsSep "," c.etcd.endpoints}'"
            "'--listen=${x.listen.host}:${toString x.listen.port}'" "'--client-cn=${x.clientCommonName}'"
            "'--etcd-cacert=${c.paths.etcdCACert}'" "'--cert=${c.paths.apiserverEtcdClientCert}'" "'--key=${c.paths.apiserverEtcdClientKey}'"
            "'--serving-cert=${c.paths.apiserverCert}'" "'--serving-key=${c.paths.apiserverKey}'"
          ]
          && lib.elem "k3s.service" svc.before && lib.elem "k3s.service" svc.requiredBy);
      "the API server's --etcd-prefix is cluster.nix's etcd.prefix" =
        lib.any (hasPrefix "--kube-apiserver-arg=etcd-prefix=") k.extraFlags == (server && c.etcd.prefix != null)
        && (server && c.etcd.prefix != null -> has "--kube-apiserver-arg=etcd-prefix=${c.etcd.prefix}");
      "--node-name is the machine's" = has "--node-name=${name}";
      "servers' API servers send Retry-After while shutting down" = has "--kube-apiserver-arg=shutdown-send-retry-after=true" == server;
      "servers' API servers never compact nico's etcd (and only there)" =
        has "--kube-apiserver-arg=etcd-compaction-interval=0" == (server && c.etcd.provider == "nico");
      "each component's extraArgs through k3s's --kube-*-arg and --kubelet-arg; an external one disabled" =
        lib.all (arg: has "--kubelet-arg=${lib.removePrefix "--" arg}") (c.componentArgs "kubelet")
        && (server -> lib.all (arg: has "--kube-apiserver-arg=${lib.removePrefix "--" arg}") (c.componentArgs "apiServer"))
        && has "--disable-scheduler" == (server && !c.runs "scheduler");
    };

  kubernetes = { cfg, m, c, name, server, ... }:
    let
      k = cfg.services.kubernetes;
      a = k.apiserver;
    in
    {
      "no roles and no easyCerts: no etcd or certificates of the module's own" = k.roles == [ ] && !k.easyCerts;
      "control plane runs the API server, controller-manager and scheduler (native ones only); data plane none" =
        a.enable == (server && c.runs "apiServer") && k.controllerManager.enable == (server && c.runs "controllerManager")
        && k.scheduler.enable == (server && c.runs "scheduler");
      "each native component's extraArgs on its command line, its limits on its unit" =
        (c.runs "kubelet" -> lib.all (arg: lib.hasInfix "'${arg}'" k.kubelet.extraOpts) (c.componentArgs "kubelet")
          && cfg.systemd.services.kubelet.serviceConfig == c.componentLimits "kubelet")
        && (server -> lib.all (arg: lib.hasInfix "'${arg}'" a.extraOpts) (c.componentArgs "apiServer")
          && cfg.systemd.services.kube-apiserver.serviceConfig == c.componentLimits "apiServer"
          && cfg.systemd.services.kube-controller-manager.serviceConfig == c.componentLimits "controllerManager"
          && (c.runs "scheduler" == cfg.systemd.services ? kube-scheduler)
          && lib.elem "kube-apiserver.service" cfg.systemd.services.kube-controller-manager.after
          && lib.elem "kube-apiserver.service" cfg.systemd.services.kubelet.after);
      "kubelet and kube-proxy on every machine; the kubelet joins with the bootstrap kubeconfig, not admin.conf" =
        k.kubelet.enable && k.proxy.enable
        && lib.hasInfix "--bootstrap-kubeconfig=${c.paths.bootstrapKubeconfig}" k.kubelet.extraOpts
        && lib.hasInfix "--rotate-certificates=true" k.kubelet.extraOpts
        && !lib.hasInfix c.paths.kubeconfig k.kubelet.extraOpts && !lib.hasInfix c.paths.kubeconfig k.proxy.extraOpts;
      "the cluster CA and endpoint" = k.caFile == c.paths.caCert && k.apiserverAddress == c.serverURL;
    } // lib.optionalAttrs server {
      "the API server on cluster.nix's etcd with the apiserver-etcd-client pair" =
        a.etcd.servers == c.etcd.endpoints && a.etcd.caFile == c.paths.etcdCACert
        && a.etcd.certFile == c.paths.apiserverEtcdClientCert && a.etcd.keyFile == c.paths.apiserverEtcdClientKey;
      "the API server's serving pair, client CA, service-account keys" =
        a.tlsCertFile == c.paths.apiserverCert && a.tlsKeyFile == c.paths.apiserverKey && a.clientCaFile == c.paths.caCert
        && a.serviceAccountKeyFile == c.paths.serviceAccountPub && a.serviceAccountSigningKeyFile == c.paths.serviceAccountKey
        && a.advertiseAddress == m.address;
      "--etcd-prefix exactly when cluster.nix has one" =
        lib.hasInfix "--etcd-prefix=" a.extraOpts == (c.etcd.prefix != null)
        && (c.etcd.prefix != null -> lib.hasInfix "--etcd-prefix=${c.etcd.prefix}" a.extraOpts)
        && lib.hasInfix "--requestheader-client-ca-file=${c.paths.frontProxyCACert}" a.extraOpts;
      "the API server sends Retry-After while shutting down, and never compacts nico's etcd (only there)" =
        lib.hasInfix "--shutdown-send-retry-after=true" a.extraOpts
        && lib.hasInfix "--etcd-compaction-interval=0" a.extraOpts == (c.etcd.provider == "nico");
      "the controller-manager signs with the cluster CA and the service-account key" =
        k.controllerManager.serviceAccountKeyFile == c.paths.serviceAccountKey
        && lib.hasInfix "--cluster-signing-key-file=${c.paths.caKey}" k.controllerManager.extraOpts
        && lib.hasInfix "bootstrapsigner,tokencleaner" k.controllerManager.extraOpts;
      "the API server takes bootstrap tokens" = lib.hasInfix "--enable-bootstrap-token-auth=true" a.extraOpts;
    };

  # The sample nix-check.sh copies beside each example's flake.nix.
  copySample = { k3s = "nico-namespaced"; kubernetes = "nico-ha"; };

  failedOn = out: name: failedAssertions out.nixosConfigurations.${name}.config;

  checks =
    forMachines "k3s" "nico-namespaced" k3s
    // forMachines "k3s" "distribution" k3s
    // forMachines "k3s" "external-single" k3s
    // forMachines "kubernetes" "nico-ha" kubernetes
    // forMachines "kubernetes" "external-single" kubernetes
    // {
      "k3s: a k3s package of another minor than cluster.nix's version fails an assertion naming both" =
        lib.any (lib.hasInfix "is k3s 1.35.0, but the KubernetesCluster k3s asks for Kubernetes 1.37.2")
          (failedOn (outputsWith { example = "k3s"; sample = "nico-namespaced"; k3sVersion = "1.35.0"; }) "cp-1");
      "k3s: nico's etcd with a key prefix and no proxy fails an assertion naming spec.etcd.namespace" =
        lib.any (lib.hasInfix "is on nico's etcd with a key prefix (/clusters/prod/registry), which k3s cannot set")
          (failedOn (outputsWith { example = "k3s"; sample = "nico-ha"; }) "cp-1")
        && lib.any (lib.hasInfix "set spec.etcd.namespace: true") (failedOn (outputsWith { example = "k3s"; sample = "nico-ha"; }) "cp-1");
      "kubernetes: a cluster.nix with etcd.proxy fails an assertion naming spec.etcd.namespace" =
        lib.any (lib.hasInfix "has spec.etcd.namespace (cluster.nix etcd.proxy)")
          (failedOn (outputsWith { example = "kubernetes"; sample = "nico-namespaced"; }) "cp-1");
      "kubernetes: the nico-ha sample's components reach the units (golden values)" =
        let
          cfg = (outputsWith { example = "kubernetes"; sample = "nico-ha"; }).nixosConfigurations.cp-1.config;
          w = (outputsWith { example = "kubernetes"; sample = "nico-ha"; }).nixosConfigurations.worker-1.config;
        in
        cfg.systemd.services.kube-apiserver.serviceConfig == { CPUQuota = "150%"; MemoryMax = "2147483648"; }
        && lib.hasSuffix "'--audit-log-path=/var/log/kube/audit.log' '--feature-gates=A=true,B=false' '--v=2'" cfg.services.kubernetes.apiserver.extraOpts
        && !cfg.services.kubernetes.scheduler.enable
        && lib.hasSuffix "'--max-pods=50'" w.services.kubernetes.kubelet.extraOpts;
      "k3s: a server's k3s.service bounded by the sum of its components' limits, only when each sets one" =
        let
          raw = import samples.nico-namespaced;
          limited = raw // { components = lib.mapAttrs (_: x: x // { limits = { CPUQuota = "0.5%"; MemoryMax = "1048576"; }; }) raw.components; };
          # nico's flake whose schema loads the sample with limits on every component.
          nicoFlake = nico // { lib.clusterSchema = schema // { load = _: schema.validate limited; }; };
          out = outputsWith { example = "k3s"; sample = "nico-namespaced"; inherit nicoFlake; };
        in
        out.nixosConfigurations.cp-1.config.systemd.services.k3s.serviceConfig == { CPUQuota = "2%"; MemoryMax = "4194304"; }
        && out.nixosConfigurations.worker-1.config.systemd.services.k3s.serviceConfig == { CPUQuota = "0.5%"; MemoryMax = "1048576"; };
      "kubernetes: etcd.provider distribution fails an assertion naming it" =
        lib.any (lib.hasInfix "has etcd.provider distribution: use nico or external")
          (failedOn (outputsWith { example = "kubernetes"; sample = "distribution"; }) "s1");
      "both: flake.nix itself, in the repository (no cluster.nix), has #minimal only; inputs nixpkgs and nico" =
        lib.all (example:
          let flake = import (../../../examples + "/${example}/flake.nix"); in
          lib.attrNames (flake.outputs { nixpkgs = nixpkgsWith "1.37.2"; inherit nico; }).nixosConfigurations == [ "minimal" ]
          && flake.inputs.nico.url == "github:homystack/nico" && flake.inputs.nixpkgs.url == "github:NixOS/nixpkgs/nixos-unstable"
          && !builtins.pathExists (../../../examples + "/${example}/cluster.nix")) [ "k3s" "kubernetes" ];
    } // lib.optionalAttrs (copies != null) {
      "both: flake.nix with cluster.nix beside it has every machine and #minimal, each as outputs.nix makes it" =
        lib.all (example:
          let
            flake = import (/. + copies + "/${example}/flake.nix");
            fromFlake = (flake.outputs { nixpkgs = nixpkgsWith "1.37.2"; inherit nico; }).nixosConfigurations;
            fromOutputs = (outputsWith { inherit example; sample = copySample.${example}; }).nixosConfigurations;
            view = cfg: {
              inherit (cfg.services) k3s;
              proxy = cfg.systemd.services.nico-etcd-proxy or null;
              inherit (cfg.services.kubernetes.apiserver) enable etcd extraOpts;
              inherit (cfg.services.kubernetes) kubelet;
              inherit (cfg.networking) hostName;
            };
          in
          lib.attrNames fromFlake == lib.attrNames fromOutputs
          && lib.all (n: builtins.toJSON (view fromFlake.${n}.config) == builtins.toJSON (view fromOutputs.${n}.config)) (lib.attrNames fromFlake)) [ "k3s" "kubernetes" ];
    } // {
      "both: a cluster.nix with a field the schema does not have is refused" =
        let
          drifted = nico // { lib.clusterSchema = schema // { load = f: schema.validate (import f // { region = "eu"; }); }; };
          refused = example: !(builtins.tryEval (builtins.deepSeq
            (lib.attrNames (outputsWith { inherit example; sample = "nico-ha"; nicoFlake = drifted; }).nixosConfigurations) true)).success;
        in
        refused "k3s" && refused "kubernetes";
    };
  failed = lib.attrNames (lib.filterAttrs (_: ok: !ok) checks);
in
if failed == [ ] then "${toString (lib.length (lib.attrNames checks))} example checks passed (k3s and kubernetes, every machine of the sample cluster.nix files)"
else throw "example checks failed:\n  ${lib.concatStringsSep "\n  " failed}"
