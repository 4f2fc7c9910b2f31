# The Nix side of cluster.nix's schema (version 3): the file nico writes
# into a Kubernetes cluster's flake for each of its machines (rendered by
# pkg/clusternix). Pure builtins, no nixpkgs:
#
#   schema = import ./cluster-schema.nix;      # nico's flake: nico.lib.clusterSchema
#   cluster = schema.load ./cluster.nix;       # schema.validate (import ./cluster.nix)
#
# validate throws "cluster.nix: FIELD: ..." for the first field that is
# missing, unknown, of the wrong type or shape, naming what is accepted, and
# returns the attribute set with these helpers added:
#
#   machines.NAME    { name, role ("controlPlane" or "dataPlane"), addresses,
#                      address (the first), isFirstServer }
#   machine NAME     machines.NAME, or an error naming the cluster's nodes
#   machineNames, controlPlaneNames, dataPlaneNames   (sorted)
#   isFirstServer NAME
#   serverURL        https://HOST:PORT of controlPlaneEndpoint
#   url HOST PORT    https://HOST:PORT (an IPv6 address in brackets)
#   firstServerMachine  the first server's machine (as machine returns it), or null
#   etcdServers      etcd.endpoints joined with ","
#   etcdProxy        null, or (with etcd.proxy) { url, args, datastore }: the
#                    namespacing proxy's URL, nico-etcd-proxy's arguments and
#                    the distribution's datastore endpoint and files
#   components.NAME  (apiServer, controllerManager, scheduler, kubelet)
#                    { provider ("native" or "external"), version, extraArgs,
#                      limits (systemd settings), external (null or { url }) }
#   runs NAME        whether the flake runs component NAME (provider native)
#   componentArgs NAME   its extraArgs as [ "--name=value" ... ], sorted
#   componentLimits NAME its limits, for systemd.services.UNIT.serviceConfig
let
  inherit (builtins)
    isAttrs isList isString isInt attrNames filter all length elem typeOf
    concatStringsSep genList elemAt match head toJSON listToAttrs map;

  schemaVersion = 3;

  fail = field: msg: throw "cluster.nix: ${if field == "" then "" else "${field}: "}${msg}";
  sub = field: k: if field == "" then k else "${field}.${k}";
  describe = v:
    if v == null then "null"
    else if isString v then "the string ${toJSON v}"
    else if isAttrs v then "an attribute set with ${if v == { } then "no fields" else concatStringsSep ", " (attrNames v)}"
    else if isList v then "a list of ${toString (length v)}"
    else if elem (typeOf v) [ "int" "bool" "float" ] then "the ${typeOf v} ${toJSON v}"
    else "a ${typeOf v}";
  # want returns true when ok, else throws naming field, the value and what is accepted.
  want = ok: field: accepted: v: if ok then true else fail field "want ${accepted}, got ${describe v}";
  # Lazy in order: each check is forced only once the ones before it passed.
  checkAll = all (x: x);

  dnsLabel = s: isString s && match "[a-z0-9]([a-z0-9-]{0,61}[a-z0-9])?" s != null;
  labelText = "a DNS label (1 to 63 lowercase letters, digits and '-', starting and ending with a letter or digit)";
  absPath = s: isString s && match "(/[A-Za-z0-9._+@-]+)+" s != null;

  # exactly checks that v is an attribute set with exactly these fields.
  exactly = field: keys: v:
    if !isAttrs v then fail field "want an attribute set with ${concatStringsSep ", " keys}, got ${describe v}"
    else
      let
        missing = filter (k: !(v ? ${k})) keys;
        unknown = filter (k: !(elem k keys)) (attrNames v);
      in
      if missing != [ ] then fail (sub field (head missing)) "missing: cluster.nix schema version ${toString schemaVersion} has ${concatStringsSep ", " keys}${if field == "" then "" else " in ${field}"}"
      else if unknown != [ ] then fail (sub field (head unknown)) "unknown field: cluster.nix schema version ${toString schemaVersion} has ${concatStringsSep ", " keys}${if field == "" then "" else " in ${field}"}"
      else true;

  # exactlyOpt is exactly, with the optional fields allowed besides keys.
  exactlyOpt = field: keys: optional: v:
    exactly field (keys ++ builtins.filter (k: isAttrs v && v ? ${k}) optional) v;

  # each checks every element of the list v with f FIELD[i] ELEMENT.
  each = field: accepted: f: v:
    want (isList v) field accepted v
    && checkAll (genList (i: f "${field}[${toString i}]" (elemAt v i)) (length v));

  nonEmptyStrings = field: v:
    each field "a non-empty list of non-empty strings" (f: s: want (isString s && s != "") f "a non-empty string" s) v
    && want (v != [ ]) field "a non-empty list of non-empty strings" v;

  node = field: n:
    exactly field [ "name" "addresses" ] n
    && want (dnsLabel n.name) "${field}.name" labelText n.name
    && nonEmptyStrings "${field}.addresses" n.addresses;

  etcdChecks = c:
    let
      e = c.etcd;
      p = e.provider;
    in
    exactlyOpt "etcd" [ "provider" "endpoints" "prefix" ] [ "proxy" ] e
    && want (elem p [ "nico" "external" "distribution" ]) "etcd.provider" ''one of "nico", "external", "distribution"'' p
    && each "etcd.endpoints" "a list of etcd client URLs" (f: s: want (isString s && match "https?://[^/ ]+" s != null) f "an etcd client URL https://HOST:PORT" s) e.endpoints
    && want (e.prefix == null || (isString e.prefix && match "(/[A-Za-z0-9._-]+)+" e.prefix != null)) "etcd.prefix" "null or a key prefix such as \"/clusters/NAME/registry\"" e.prefix
    && want (p == "distribution" -> e.endpoints == [ ]) "etcd.endpoints" "no endpoints with etcd.provider \"distribution\"" e.endpoints
    && want (p == "distribution" -> e.prefix == null) "etcd.prefix" "null with etcd.provider \"distribution\"" e.prefix
    && want (p == "distribution" -> c.firstServer != null) "firstServer" "the initialising control-plane node with etcd.provider \"distribution\"" c.firstServer
    && want (p != "distribution" -> e.endpoints != [ ]) "etcd.endpoints" "at least one endpoint with etcd.provider ${toJSON p}" e.endpoints
    && want (p == "nico" -> (e.prefix != null || (e.proxy or null) != null)) "etcd.prefix" "a key prefix with etcd.provider \"nico\" (or etcd.proxy)" e.prefix
    && proxyChecks e;

  # etcd.proxy (optional, null when absent): the namespacing etcd proxy a
  # control-plane machine runs for a distribution with no etcd prefix.
  proxyChecks = e:
    let x = e.proxy or null; in
    x == null || (
      want (e.provider == "nico") "etcd.proxy" "no proxy with etcd.provider ${toJSON e.provider}" x
      && want (e.prefix == null) "etcd.prefix" "null with etcd.proxy (the proxy's namespace holds the distribution's keys)" e.prefix
      && exactly "etcd.proxy" [ "namespace" "listen" "clientCommonName" ] x
      && want (isString x.namespace && match "(/[A-Za-z0-9._-]+)+/" x.namespace != null) "etcd.proxy.namespace" "a key prefix ending in '/', such as \"/clusters/NAME/\"" x.namespace
      && exactly "etcd.proxy.listen" [ "host" "port" ] x.listen
      && want (isString x.listen.host && (match "127\\.[0-9]+\\.[0-9]+\\.[0-9]+" x.listen.host != null || x.listen.host == "::1")) "etcd.proxy.listen.host" "a loopback address such as \"127.0.0.1\"" x.listen.host
      && want (isInt x.listen.port && x.listen.port >= 1 && x.listen.port <= 65535) "etcd.proxy.listen.port" "an integer from 1 to 65535" x.listen.port
      && want (isString x.clientCommonName && x.clientCommonName != "") "etcd.proxy.clientCommonName" "the cluster's etcd user, a non-empty string" x.clientCommonName);

  componentNames = [ "apiServer" "controllerManager" "scheduler" "kubelet" ];
  stringAttrs = field: keyOk: keyText: valueOk: valueText: v:
    want (isAttrs v) field "an attribute set of strings" v
    && checkAll (map (k: want (keyOk k) field "names that are ${keyText} (got ${toJSON k})" v
      && want (isString v.${k} && valueOk v.${k}) "${field}.${k}" valueText v.${k}) (attrNames v));

  # components.NAME: how the flake runs each Kubernetes component.
  component = c: name:
    let
      field = "components.${name}";
      x = c.components.${name};
    in
    exactly field [ "provider" "version" "extraArgs" "limits" "external" ] x
    && want (elem x.provider [ "native" "external" ]) "${field}.provider" ''one of "native", "external"'' x.provider
    && want (isString x.version && match "[0-9]+\\.[0-9]+(\\.[0-9]+)?" x.version != null) "${field}.version" "a Kubernetes version such as \"1.37.2\"" x.version
    && stringAttrs "${field}.extraArgs" (k: match "[a-z][a-z0-9-]*" k != null) "flag names without the leading --"
      (v: match "[^\n\r]*" v != null) "a string on one line" x.extraArgs
    && stringAttrs "${field}.limits" (k: elem k [ "CPUQuota" "MemoryMax" ]) "CPUQuota or MemoryMax"
      (v: match "[0-9]+(\\.[0-9]+)?%|[1-9][0-9]*" v != null) "a percentage (CPUQuota) or a number of bytes (MemoryMax)" x.limits
    && want ((x.provider == "external") == (x.external != null)) "${field}.external" "{ url } exactly with provider \"external\", null with \"native\"" x.external
    && (x.external == null || (exactly "${field}.external" [ "url" ] x.external
      && want (isString x.external.url && match "https?://[^/ ]+.*" x.external.url != null) "${field}.external.url" "an http or https URL" x.external.url));

  componentChecks = c:
    exactly "components" componentNames c.components
    && checkAll (map (component c) componentNames);

  pathKeys = [
    "apiserverCert" "apiserverEtcdClientCert" "apiserverEtcdClientKey" "apiserverKey" "bootstrapKubeconfig" "bootstrapToken" "caCert" "caKey" "etcdCACert" "frontProxyCACert"
    "frontProxyCAKey" "joinToken" "kubeconfig" "machineSSHKey" "serviceAccountKey" "serviceAccountPub"
  ];

  check = c:
    let
      names = map (n: n.name) (c.nodes.controlPlane ++ c.nodes.dataPlane);
      dups = filter (n: length (filter (m: m == n) names) > 1) names;
      cpNames = map (n: n.name) c.nodes.controlPlane;
    in
    want (isAttrs c) "" "an attribute set (is this a cluster.nix?)" c
    && want (c ? schemaVersion) "schemaVersion" "the schema version ${toString schemaVersion}: the field is missing" c
    && want (c.schemaVersion == schemaVersion) "schemaVersion"
      "${toString schemaVersion}, the version this nico lib reads (update the flake's nico input to the nico that wrote this file)" c.schemaVersion
    && exactly "" [ "schemaVersion" "name" "version" "controlPlaneEndpoint" "firstServer" "nodes" "etcd" "components" "paths" ] c
    && want (dnsLabel c.name) "name" labelText c.name
    && want (isString c.version && match "[0-9]+\\.[0-9]+(\\.[0-9]+)?" c.version != null) "version" "a Kubernetes version such as \"1.37.2\"" c.version
    && exactly "controlPlaneEndpoint" [ "host" "port" ] c.controlPlaneEndpoint
    && want (isString c.controlPlaneEndpoint.host && c.controlPlaneEndpoint.host != "") "controlPlaneEndpoint.host" "a non-empty string" c.controlPlaneEndpoint.host
    && want (isInt c.controlPlaneEndpoint.port && c.controlPlaneEndpoint.port >= 1 && c.controlPlaneEndpoint.port <= 65535) "controlPlaneEndpoint.port" "an integer from 1 to 65535" c.controlPlaneEndpoint.port
    && exactly "nodes" [ "controlPlane" "dataPlane" ] c.nodes
    && each "nodes.controlPlane" "a list of nodes { name, addresses }" node c.nodes.controlPlane
    && want (c.nodes.controlPlane != [ ]) "nodes.controlPlane" "at least one control-plane node" c.nodes.controlPlane
    && each "nodes.dataPlane" "a list of nodes { name, addresses }" node c.nodes.dataPlane
    && want (dups == [ ]) "nodes" "node names that are unique across both roles (${toJSON (head dups)} is listed twice)" c.nodes
    && want (c.firstServer == null || elem c.firstServer cpNames) "firstServer" "null or one of nodes.controlPlane's names (${concatStringsSep ", " cpNames})" c.firstServer
    && etcdChecks c
    && componentChecks c
    && exactly "paths" pathKeys c.paths
    && checkAll (map (k: want (absPath c.paths.${k}) "paths.${k}" "an absolute path of letters, digits and . _ + @ -" c.paths.${k}) pathKeys);

  # An IPv6 address in brackets, for a URL.
  bracket = h: if match ".*:.*" h != null then "[${h}]" else h;

  helpers = c:
    let
      url = host: port: "https://${bracket host}:${toString port}";
      withRole = role: map (n: {
        name = n.name;
        value = n // { inherit role; address = head n.addresses; isFirstServer = n.name == c.firstServer; };
      }) c.nodes.${role};
      machines = listToAttrs (withRole "controlPlane" ++ withRole "dataPlane");
      sortedNames = ns: builtins.sort builtins.lessThan ns;
    in
    {
      inherit machines;
      machine = name:
        if machines ? ${name} then machines.${name}
        else throw "cluster.nix: no node named ${toJSON name}; the cluster's nodes are ${concatStringsSep ", " (attrNames machines)}";
      machineNames = attrNames machines;
      controlPlaneNames = sortedNames (map (n: n.name) c.nodes.controlPlane);
      dataPlaneNames = sortedNames (map (n: n.name) c.nodes.dataPlane);
      isFirstServer = name: c.firstServer != null && name == c.firstServer;
      inherit url;
      serverURL = url c.controlPlaneEndpoint.host c.controlPlaneEndpoint.port;
      firstServerMachine = if c.firstServer == null then null else machines.${c.firstServer};
      etcdServers = concatStringsSep "," c.etcd.endpoints;
      runs = name: c.components.${name}.provider == "native";
      componentArgs = name: let a = c.components.${name}.extraArgs; in map (k: "--${k}=${a.${k}}") (attrNames a);
      componentLimits = name: c.components.${name}.limits;
      # The namespacing proxy (etcd.proxy), or null: its URL, the
      # arguments of nico-etcd-proxy, and the distribution's datastore
      # flags (the proxy serves the API server certificate, signed by the
      # cluster CA; the client pair is the cluster's etcd identity).
      etcdProxy =
        let x = c.etcd.proxy or null; p = c.paths; in
        let proxyURL = url x.listen.host x.listen.port; in
        if x == null then null else {
          url = proxyURL;
          args = [
            "--namespace=${x.namespace}"
            "--endpoints=${concatStringsSep "," c.etcd.endpoints}"
            "--listen=${bracket x.listen.host}:${toString x.listen.port}"
            "--client-cn=${x.clientCommonName}"
            "--etcd-cacert=${p.etcdCACert}"
            "--cert=${p.apiserverEtcdClientCert}"
            "--key=${p.apiserverEtcdClientKey}"
            "--serving-cert=${p.apiserverCert}"
            "--serving-key=${p.apiserverKey}"
          ];
          datastore = { endpoint = proxyURL; cafile = p.caCert; certfile = p.apiserverEtcdClientCert; keyfile = p.apiserverEtcdClientKey; };
        };
    };

  validate = c: if check c then c // helpers c else fail "" "invalid";
in
{
  inherit schemaVersion validate;
  # load imports a cluster.nix file and validates it.
  load = path: validate (import path);
}
