# Renders the unit files and the files they name for the hosts of the
# real-systemd tier (hosts.nix), from nixos-module/ evaluated with nixpkgs'
# lib (the option declarations of tests/nixos/eval/stubs.nix, nixpkgs'
# etcd unit as etcd.nix sets it), by the rules of nixpkgs'
# nixos/lib/systemd-lib.nix and nixos/modules/system/boot/systemd.nix:
#
#   [Unit]     unitConfig plus Description, Requires, Wants, After, Before,
#              PartOf (lists joined by spaces), X-Reload-Triggers
#              (reloadTriggers), X-Restart-Triggers (restartTriggers);
#              keys sorted, as attribute names are
#   [Service]  Environment="NAME=value" (JSON-quoted) for environment,
#              systemd.globalEnvironment and PATH (from path, plus the
#              default coreutils findutils gnugrep gnused systemd: each
#              package's bin, then each one's sbin), X-RestartIfChanged=false
#              and X-StopIfChanged=false, then serviceConfig; a list value
#              is one line per element, true/false are "true"/"false"
#   [Install]  WantedBy (joined by spaces) when wantedBy is not empty
#   script / preStart become ExecStart / ExecStartPre of a wrapper script
#   (bash, `set -e`) in the store.
#
# `files` maps "<host>/<path in the guest's root>" to the file's text:
# etc/systemd/system/<unit>, the environment.etc files, etc/set-environment
# (environment.variables), and the store
# files units name (configuration files, wrapper scripts). `fixture` says
# which store path is which package and each host's address, for the Go
# tests that substitute the real binaries (tests/systemd).
#
#   nix-instantiate --eval --strict --json tests/systemd/render -A files --arg lib 'import /path/to/nixpkgs/lib'
#
# `module` renders another copy of the module (another branch's, say).
{ lib, module ? ../../../nixos-module }:

let
  stubPkgs = import ../../nixos/eval/pkgs.nix { inherit lib; };
  fakeDrv = name: {
    type = "derivation";
    inherit name;
    outPath = "/nix/store/00000000000000000000000000000000-${name}";
  };
  # A file in the store whose path changes with its text, as a real
  # store path does (the stubs' paths are all-zero): a changed
  # configuration is a new ExecStart, as on NixOS.
  textDrv = name: text: {
    type = "derivation";
    inherit name text;
    outPath = "/nix/store/${builtins.substring 0 32 (builtins.hashString "sha256" "${name}\n${text}")}-${name}";
  };
  # The packages NixOS adds to every unit or environment, beyond the stubs'.
  pkgs = stubPkgs // {
    writeText = textDrv;
    writeShellScript = name: text: textDrv name "#!${stubPkgs.bash}/bin/bash\n${text}";
    formats.yaml = { }: {
      inherit ((stubPkgs.formats.yaml { })) type;
      generate = name: value: (textDrv name (builtins.toJSON value)) // { inherit value; };
    };
    findutils = fakeDrv "findutils-4";
    gnugrep = fakeDrv "gnugrep-3";
    gnused = fakeDrv "gnused-4";
    tzdata = fakeDrv "tzdata-2025";
    glibcLocales = fakeDrv "glibc-locales-2";
  };

  # The stubs' option declarations only.
  stubOptions = { config, ... }@args: { options = (import ../../nixos/eval/stubs.nix { inherit lib pkgs; } args).options; };

  # script and preStart, as NixOS declares and turns them into commands.
  jobScripts = { config, ... }: {
    options.systemd.services = lib.mkOption {
      type = lib.types.attrsOf (lib.types.submodule ({ name, config, ... }: {
        options.script = lib.mkOption { type = lib.types.lines; default = ""; };
        options.preStart = lib.mkOption { type = lib.types.lines; default = ""; };
        config.serviceConfig = lib.mkMerge [
          (lib.mkIf (config.preStart != "") { ExecStartPre = [ (jobScript "${name}-pre-start" config.preStart) ]; })
          (lib.mkIf (config.script != "") { ExecStart = jobScript "${name}-start" config.script; })
        ];
      }));
    };
  };
  jobScriptDrv = name: text:
    (fakeDrv "unit-script-${name}") // { script = name; text = "#!${pkgs.bash}/bin/bash\nset -e\n\n${text}\n"; };
  jobScript = name: text: "${(jobScriptDrv name text).outPath}/bin/${name}";

  hosts = import ./hosts.nix { inherit lib; };

  evalHost = name: host: (lib.evalModules {
    modules = [
      stubOptions
      jobScripts
      (import ./etcd.nix { inherit lib pkgs; })
      module
      { _module.args.pkgs = pkgs; }
      host.module
    ];
  }).config;

  # nixos/lib/systemd-lib.nix's toOption and attrsToSection.
  toOption = x: if x == true then "true" else if x == false then "false" else toString x;
  section = attrs: lib.concatStrings (lib.concatLists (lib.mapAttrsToList
    (k: v: map (x: "${k}=${toOption x}\n") (if lib.isList v then v else [ v ])) attrs));

  defaultPath = [ pkgs.coreutils pkgs.findutils pkgs.gnugrep pkgs.gnused pkgs.systemd ];
  binPath = ps: lib.concatMapStringsSep ":" (p: "${p}/bin") ps;
  sbinPath = ps: lib.concatMapStringsSep ":" (p: "${p}/sbin") ps;
  # systemd.globalEnvironment of a default NixOS system (i18n, time zones).
  globalEnvironment = {
    LOCALE_ARCHIVE = "${pkgs.glibcLocales}/lib/locale/locale-archive";
    TZDIR = "${pkgs.tzdata}/share/zoneinfo";
  };

  unitText = svc:
    let
      path = svc.path ++ defaultPath;
      env = globalEnvironment // svc.environment // { PATH = "${binPath path}:${sbinPath path}"; };
      unitConfig = svc.unitConfig
        // lib.optionalAttrs (svc.requires != [ ]) { Requires = toString svc.requires; }
        // lib.optionalAttrs (svc.wants != [ ]) { Wants = toString svc.wants; }
        // lib.optionalAttrs (svc.after != [ ]) { After = toString svc.after; }
        // lib.optionalAttrs (svc.before != [ ]) { Before = toString svc.before; }
        // lib.optionalAttrs (svc.partOf != [ ]) { PartOf = toString svc.partOf; }
        // lib.optionalAttrs (svc.description != "") { Description = svc.description; }
        // lib.optionalAttrs (svc.reloadTriggers != [ ]) { X-Reload-Triggers = toString svc.reloadTriggers; }
        // lib.optionalAttrs (svc.restartTriggers != [ ]) { X-Restart-Triggers = toString svc.restartTriggers; };
    in
    "[Unit]\n${section unitConfig}\n"
    + "[Service]\n"
    + lib.concatMapStrings (n: lib.optionalString (env.${n} != null) "Environment=${builtins.toJSON "${n}=${env.${n}}"}\n") (lib.attrNames env)
    + lib.optionalString (!svc.restartIfChanged) "X-RestartIfChanged=false\n"
    + lib.optionalString (!svc.stopIfChanged) "X-StopIfChanged=false\n"
    + section svc.serviceConfig
    + lib.optionalString (svc.wantedBy != [ ]) "\n[Install]\nWantedBy=${lib.concatStringsSep " " svc.wantedBy}\n";

  # environment.variables as NixOS's /etc/set-environment exports them
  # (a list value is joined by ":").
  setEnvironment = vars: lib.concatStrings (lib.mapAttrsToList
    (n: v: "export ${n}=${builtins.toJSON (if lib.isList v then lib.concatStringsSep ":" v else v)}\n") vars);

  # The store files a host's units and /etc name: derivations with a text.
  storeFile = d: lib.nameValuePair (lib.removePrefix "/" (if d ? script then "${d.outPath}/bin/${d.script}" else d.outPath)) d.text;
  hostFiles = cfg:
    let
      etc = lib.filterAttrs (_: e: e.enable) cfg.environment.etc;
      scripts = lib.concatLists (lib.mapAttrsToList (n: svc:
        lib.optional (svc.script != "") (jobScriptDrv "${n}-start" svc.script)
        ++ lib.optional (svc.preStart != "") (jobScriptDrv "${n}-pre-start" svc.preStart)) cfg.systemd.services);
    in
    lib.mapAttrs' (n: svc: lib.nameValuePair "etc/systemd/system/${n}.service" (unitText svc)) cfg.systemd.services
    // lib.mapAttrs' (n: e: lib.nameValuePair "etc/${n}" (if e.text != null then e.text else e.source.text)) etc
    // { "etc/set-environment" = setEnvironment cfg.environment.variables; }
    # systemd.tmpfiles.rules, one a line, as NixOS writes them.
    // lib.optionalAttrs (cfg.systemd.tmpfiles.rules != [ ]) { "etc/tmpfiles.d/00-nixos.conf" = lib.concatMapStrings (r: "${r}\n") cfg.systemd.tmpfiles.rules; }
    // lib.listToAttrs (map storeFile (map (e: e.source) (lib.filter (e: e.text == null && e.source ? text) (lib.attrValues etc)) ++ scripts ++ preSwitchOf cfg));

  # system.preSwitchChecks as one script, the way nixpkgs'
  # system/activation/pre-switch-check.nix makes it: each fragment in a
  # subshell, the script stopping at the first that fails;
  # switch-to-configuration runs it with the toplevel and the action.
  preSwitchScript = checks: pkgs.writeShellScript "pre-switch-checks" (lib.concatStrings (lib.mapAttrsToList (name: text: ''
    # pre-switch check ${name}
    (
      ${text}
    )
    if [[ $? != 0 ]]; then
      echo "Pre-switch check '${name}' failed"
      exit 1
    fi
  '') checks));
  preSwitchOf = cfg: lib.optional (cfg.system.preSwitchChecks != { }) (preSwitchScript cfg.system.preSwitchChecks);

  configs = lib.mapAttrs evalHost hosts;
  failed = lib.concatLists (lib.mapAttrsToList (n: cfg: map (a: "${n}: ${a.message}") (lib.filter (a: !a.assertion) cfg.assertions)) configs);
in
assert lib.assertMsg (failed == [ ]) (lib.concatStringsSep "\n" failed);
{
  files = lib.concatMapAttrs (n: cfg: lib.mapAttrs' (p: text: lib.nameValuePair "${n}/${p}" text) (hostFiles cfg)) configs;
  fixture = {
    packages = lib.mapAttrs (_: p: p.outPath) {
      inherit (pkgs) nico etcd coreutils findutils gnugrep gnused systemd bash tzdata glibcLocales nix git;
    };
    hosts = lib.mapAttrs (n: h: { inherit (h) address; } // lib.optionalAttrs (preSwitchOf configs.${n} != [ ]) {
      # The script switch-to-configuration runs first (system.preSwitchChecks).
      preSwitchCheck = (lib.head (preSwitchOf configs.${n})).outPath;
    }) hosts;
  };
}
