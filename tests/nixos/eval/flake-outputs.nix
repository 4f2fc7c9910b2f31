# Evaluates flake.nix with nixpkgs' lib and stand-in packages for the
# nixpkgs input (make nix-check): the overlay calls
# nixos-module/package.nix with a vendorHash, nixosModules.default
# evaluates against the stubs, and every output has the attributes `nix
# flake check` and users look for. Nothing is built.
{ lib }:

let
  flake = import ../../../flake.nix;
  self = flake.outputs { inherit self nixpkgs; } // { outPath = toString ../../..; };
  e = import ./. { inherit lib; };

  # nixpkgs.legacyPackages.<system>, with `extend` applying an overlay.
  nixpkgs = {
    inherit lib;
    legacyPackages = lib.genAttrs [ "x86_64-linux" "aarch64-linux" ] (system:
      let
        base = e.pkgs // {
          inherit lib;
          stdenv.hostPlatform.system = system;
          callPackage = path: args: { type = "derivation"; name = "nico"; outPath = "/nix/store/00000000000000000000000000000000-nico"; inherit path args; };
          mkShell = args: { type = "derivation"; name = "shell"; inherit args; };
          runCommand = name: _env: script: { type = "derivation"; inherit name script; };
          go = "go";
          gopls = "gopls";
          gnumake = "gnumake";
          pkg-config = "pkg-config";
          nixfmt = "nixfmt";
        };
      in
      base // { extend = overlay: base // overlay base base; });
  };
  pkgsX = nixpkgs.legacyPackages.x86_64-linux;

  called = self.overlays.default { callPackage = path: args: { inherit path args; }; } { };

  host = (e.eval [
    self.nixosModules.default
    { services.nico = { enable = true; bootstrap = true; roles = [ "controlPlane" ]; package = lib.mkForce e.pkgs.nico; }; }
  ]).config;

  # The module imported three times (twice by one name, once by the other),
  # as a configuration that imports it and a module that imports it too
  # would; its package is the flake's.
  imported = roles: (e.eval [
    self.nixosModules.default
    self.nixosModules.nico
    { imports = [ self.nixosModules.default ]; }
    { services.nico = { enable = true; bootstrap = true; inherit roles; }; }
  ]).config.services.nico.package;

  # package.nix called with a buildGoModule that returns its arguments.
  pkgArgsWith = extra: import ../../../nixos-module/package.nix ({
    inherit lib;
    # buildGoModule.override { go } returns a builder that returns its arguments.
    buildGoModule.override = o: args: args // o;
    go = "go";
    pkg-config = "pkg-config";
    libvirt = "libvirt";
    vendorHash = called.nico.args.vendorHash;
  } // extra);
  pkgArgs = pkgArgsWith { };
  pkgArgsLibvirt = pkgArgsWith { withLibvirt = true; };

  # The overlay's Go, from package sets where go_1_26 is a package, missing,
  # or an alias that throws.
  goOf = pkgs: (self.overlays.default (pkgs // { callPackage = _: args: args; }) { }).nico.go;

  names = lib.attrNames;
  lock = builtins.fromJSON (builtins.readFile ../../../flake.lock);
  checks = {
    "flake.lock pins the nixpkgs input flake.nix names (a commit and its NAR hash)" =
      lock.nodes.root.inputs == { nixpkgs = "nixpkgs"; }
      && lock.nodes.nixpkgs.original == { owner = "NixOS"; repo = "nixpkgs"; ref = "nixos-unstable"; type = "github"; }
      && builtins.match "[0-9a-f]{40}" lock.nodes.nixpkgs.locked.rev != null
      && builtins.match "sha256-[A-Za-z0-9+/]{43}=" lock.nodes.nixpkgs.locked.narHash != null;
    "flake: checks are both packages, the module eval, the docs drift check and VM tests 1 to 4" =
      names self.checks.x86_64-linux == [ "module-eval" "options-doc" "package" "package-hypervisor" "vm-bootstrap" "vm-removal-and-leader-crash" "vm-rollout-halts" "vm-self-join" ]
      && names self.checks.aarch64-linux == names self.checks.x86_64-linux;
    "flake: vmTests hold every VM test, the hypervisor one too" =
      names self.legacyPackages.x86_64-linux.vmTests == [ "vm-bootstrap" "vm-hypervisor" "vm-removal-and-leader-crash" "vm-rollout-halts" "vm-self-join" ]
      && self.legacyPackages.x86_64-linux.vmTests.vm-hypervisor.test.name == "nico-hypervisor";
    "flake: packages default and nico are the overlay's nico; options-doc" =
      names self.packages.x86_64-linux == [ "default" "nico" "nico-hypervisor" "options-doc" ]
      && self.packages.x86_64-linux.nico-hypervisor.args.withLibvirt
      && self.packages.x86_64-linux.default.args.vendorHash == called.nico.args.vendorHash
      && self.checks.x86_64-linux.package.path == self.packages.x86_64-linux.nico.path;
    "flake: devShell has Go, etcd, pkg-config and libvirt; formatter" =
      lib.all (p: lib.elem p self.devShells.x86_64-linux.default.args.packages) [ "go" "pkg-config" pkgsX.libvirt pkgsX.etcd ]
      && self.formatter.x86_64-linux == "nixfmt";
    "package (defect 12): nico without cgo and libvirt; nico-hypervisor with cgo, pkg-config and libvirt" =
      pkgArgs.env.CGO_ENABLED == "0" && pkgArgs.buildInputs == [ ] && pkgArgs.nativeBuildInputs == [ ]
      && !pkgArgs.passthru.withLibvirt && pkgArgs.pname == "nico"
      && pkgArgsLibvirt.env.CGO_ENABLED == "1" && pkgArgsLibvirt.nativeBuildInputs == [ "pkg-config" ]
      && pkgArgsLibvirt.buildInputs == [ "libvirt" ] && pkgArgsLibvirt.passthru.withLibvirt
      && pkgArgsLibvirt.pname == "nico-hypervisor" && pkgArgs.go == "go";
    "overlay (defect 12): go_1_26 when nixpkgs has it, else go, also when go_1_26 is an alias that throws" =
      goOf { go = "go"; go_1_26 = "go_1_26"; } == "go_1_26"
      && goOf { go = "go"; } == "go"
      && goOf { go = "go"; go_1_26 = throw "go_1_26 has been removed"; } == "go";
    "module (defect 12): imported three times, the package is defined once, the flake's (nico-hypervisor on a hypervisor)" =
      (imported [ "controlPlane" ]).args == self.packages.x86_64-linux.nico.args
      && (imported [ "controlPlane" "hypervisor" ]).args.withLibvirt or false;
    "package: the four programs (nico-etcd-proxy for examples/k3s), the flake's vendorHash" =
      pkgArgs.subPackages == [ "agent/cmd/nico-agent" "agent/cmd/nico-etcd-proxy" "coordinator/cmd/nico-coordinator" "coordinator/cmd/nicoctl" ]
      && pkgArgs.vendorHash == called.nico.args.vendorHash;
    "package: the source leaves out the cache, build outputs and git" =
      lib.all (n: !(pkgArgs.src.filter (toString ../../.. + "/" + n) "directory")) [ ".cache" "bin" ".git" ]
      && pkgArgs.src.filter (toString ../../../go.mod) "regular";
    "flake: inputs.nixpkgs follows nixos-unstable" = flake.inputs.nixpkgs.url == "github:NixOS/nixpkgs/nixos-unstable";
    "flake: overlay builds nixos-module/package.nix" = baseNameOf (toString called.nico.path) == "package.nix";
    "flake: vendorHash is an SRI sha256" = builtins.match "sha256-[A-Za-z0-9+/]{43}=" called.nico.args.vendorHash != null;
    "flake: lib.clusterSchema is nixos-module/lib/cluster-schema.nix (schema version 1)" =
      self.lib.clusterSchema.schemaVersion == 3 && self.lib.clusterSchema ? load;
    "flake: nixosModules.default is the module" = host.systemd.services ? nico-agent && host.services.etcd.enable;
  };
  failed = lib.attrNames (lib.filterAttrs (_: ok: !ok) checks);
in
if failed == [ ] then "${toString (lib.length (lib.attrNames checks))} flake checks passed"
else throw "flake checks failed:\n  ${lib.concatStringsSep "\n  " failed}"
