{
  description = "nico: NixOS fleet agents and a leader-elected coordinator that grow and shrink etcd through learners";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: lib.genAttrs systems (system: f (nixpkgs.legacyPackages.${system}.extend self.overlays.default));
      version = self.shortRev or self.dirtyShortRev or "dev";
      # Go >= 1.26, as go.mod asks: go_1_26 where nixpkgs has it by that
      # name, else its default go (once nixpkgs drops go_1_26 or turns it
      # into an alias that throws, which tryEval catches).
      goFor = pkgs: let t = builtins.tryEval (pkgs.go_1_26 or null); in
        if t.success && t.value != null then t.value else pkgs.go;
    in
    {
      # nico (without libvirt) for every host, nico-hypervisor (cgo and
      # libvirt) for hosts with the hypervisor role; services.nico picks.
      overlays.default = final: _prev:
        let
          args = {
            inherit version;
            go = goFor final;
            # make vendor-hash rewrites this line; make nix-check compares it.
            vendorHash = "sha256-HgFWcVk+UWful/HALc6J1UXyJHLXue41ft1Nfor6SdQ=";
          };
        in
        {
          nico = final.callPackage ./nixos-module/package.nix args;
          nico-hypervisor = final.callPackage ./nixos-module/package.nix (args // { withLibvirt = true; });
        };

      packages = forAllSystems (pkgs: {
        nico = pkgs.nico;
        nico-hypervisor = pkgs.nico-hypervisor;
        default = pkgs.nico;
        # The option reference rendered by nixpkgs' nixosOptionsDoc (the
        # repository keeps docs/options.md, rendered with lib alone).
        options-doc = (pkgs.nixosOptionsDoc {
          options = (lib.nixosSystem {
            inherit (pkgs.stdenv.hostPlatform) system;
            modules = [ self.nixosModules.default ];
          }).options.services.nico;
        }).optionsCommonMark;
      });

      # The module, with services.nico.package defaulting to this flake's
      # (nico-hypervisor on hypervisor hosts). Its key is the same for
      # every import of it (nixosModules.default, nixosModules.nico, or one
      # imported twice): the module system imports a key once, so the
      # package is defined once.
      nixosModules.default = { config, lib, pkgs, ... }: {
        key = "github:homystack/nico#nixosModules.default";
        imports = [ ./nixos-module ];
        services.nico.package = lib.mkDefault
          self.packages.${pkgs.stdenv.hostPlatform.system}.${if lib.elem "hypervisor" config.services.nico.roles then "nico-hypervisor" else "nico"};
      };
      nixosModules.nico = self.nixosModules.default;

      # The Nix side of cluster.nix's schema, which a KubernetesCluster's
      # flake loads its cluster.nix with (examples/k3s, examples/kubernetes):
      # nico.lib.clusterSchema.load ./cluster.nix. Pure builtins.
      lib.clusterSchema = import ./nixos-module/lib/cluster-schema.nix;

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = [ (goFor pkgs) pkgs.gopls pkgs.etcd pkgs.gnumake pkgs.git pkgs.pkg-config pkgs.libvirt ];
        };
      });

      formatter = forAllSystems (pkgs: pkgs.nixfmt);

      checks = forAllSystems (pkgs:
        let
          moduleEval = import ./tests/nixos/eval { inherit lib; };
          vmNodesEval = import ./tests/nixos/eval/vm-tests.nix { inherit lib; };
        in
        {
          package = pkgs.nico;
          package-hypervisor = pkgs.nico-hypervisor;
          # The lib-only checks of make nix-check, against nixpkgs' lib.
          module-eval = pkgs.runCommand "nico-module-eval" { } ''
            echo ${lib.escapeShellArg moduleEval.checks} > $out
            echo ${lib.escapeShellArg vmNodesEval.checks} >> $out
          '';
          options-doc = pkgs.runCommand "nico-options-doc-drift" { } ''
            diff -u ${./docs/options.md} ${pkgs.writeText "options.md" moduleEval.optionsDoc}
            touch $out
          '';
        } // (import ./tests/nixos { inherit pkgs self; }).checks);

      # Every VM test, the optional ones too: `nix build
      # .#vmTests.vm-hypervisor` runs test 5 (a hypervisor host provisions a
      # libvirt VM), which is left out of `checks` because it runs a guest
      # inside a test VM (tests/nixos/hypervisor.nix).
      legacyPackages = forAllSystems (pkgs: {
        vmTests = let t = import ./tests/nixos { inherit pkgs self; }; in t.checks // t.optional;
      });
    };
}
