# The typed options of the HTTP endpoints nico's programs serve besides
# etcd (the agent's and the coordinator's `metrics.*`, the coordinator's
# `statusPage.*`), and the assertions on them. Their rule is the programs'
# (pkg/httpserve): plain HTTP on a loopback address; anywhere else TLS
# only, requiring a client certificate of `tls.clientCAFile`.
{ lib }:

let
  inherit (lib) mkOption types;

  absPath = types.strMatching "/.*" // { description = "absolute path"; };
  listen = types.strMatching "([^ ]*:[0-9]+)?" // {
    description = "host:port (host may be empty: every address), or empty to serve nothing";
  };

  # The host of a host:port ("[::1]:9479" gives "::1").
  hostOf = hp: lib.removeSuffix "]" (lib.removePrefix "[" (lib.concatStringsSep ":" (lib.init (lib.splitString ":" hp))));
in
rec {
  # loopback tells whether host:port is on "localhost" or a loopback IP
  # (an empty host is every address).
  loopback = hp:
    let h = hostOf hp; in
    h == "localhost" || h == "::1" || builtins.match "127\\.[0-9.]+" h != null;

  # options of one endpoint: what it serves (for the descriptions), its
  # default address, and who presents client certificates to it.
  options = { serves, defaultListen, clients, tlsNote ? "" }: {
    listen = mkOption {
      type = listen;
      default = defaultListen;
      example = "10.0.0.1:${lib.last (lib.splitString ":" defaultListen)}";
      description = ''
        host:port of ${serves}.
        On a loopback address (the default) it is plain HTTP, for anyone
        on this host; on any other address it is TLS only (`tls.certFile`,
        `tls.keyFile`) and requires a client certificate that chains to
        `tls.clientCAFile`. Empty serves nothing.${tlsNote}
      '';
    };
    tls.certFile = mkOption {
      type = types.nullOr absPath;
      default = null;
      example = "/var/lib/nico/pki/metrics.crt";
      description = "Server certificate (PEM) of ${serves}; needed when `listen` is not loopback.";
    };
    tls.keyFile = mkOption {
      type = types.nullOr absPath;
      default = null;
      example = "/run/keys/metrics.key";
      description = "Private key (PEM) of `tls.certFile`: a path outside the Nix store, read at run time.";
    };
    tls.clientCAFile = mkOption {
      type = types.nullOr absPath;
      default = null;
      example = "/var/lib/nico/pki/ca.crt";
      description = "CA certificate (PEM) the client certificates of ${clients} must chain to when `listen` is not loopback, such as the cluster CA (`<pki.dir>/ca.crt`).";
    };
  };

  # assertions on the endpoint e whose options are at path
  # ("services.nico.settings.metrics"); inStore tells a Nix store path.
  assertions = path: e: inStore: [
    {
      assertion = e.listen == "" || loopback e.listen || (e.tls.certFile != null && e.tls.keyFile != null && e.tls.clientCAFile != null);
      message = "${path}.listen (${e.listen}) is not a loopback address, so it is served over TLS only, with client certificates: set ${path}.tls.certFile, tls.keyFile and tls.clientCAFile, or listen on loopback (such as 127.0.0.1:${lib.last (lib.splitString ":" e.listen)}).";
    }
    {
      assertion = !inStore e.tls.keyFile;
      message = "${path}.tls.keyFile (${toString e.tls.keyFile}) is in the Nix store, readable by every user: give the path of a file outside the store.";
    }
  ];
}
