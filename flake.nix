{
  description = "nico: NixOS fleet agents and a leader-elected coordinator that grow and shrink etcd through learners";

  inputs.nixpkgs.url = "github:NixOS/nixpkgs/nixos-unstable";

  outputs = { self, nixpkgs }:
    let
      inherit (nixpkgs) lib;
      systems = [ "x86_64-linux" "aarch64-linux" ];
      forAllSystems = f: lib.genAttrs systems (system: f (nixpkgs.legacyPackages.${system}.extend self.overlays.default));
      version = self.shortRev or self.dirtyShortRev or "dev";
    in
    {
      overlays.default = final: _prev: {
        nico = final.callPackage ./nixos-module/package.nix {
          inherit version;
          # make vendor-hash rewrites this line; make nix-check compares it.
          vendorHash = "sha256-HszNuKQCvLuO0j4FadE0dwDzB4/Aa1hQla2XUDtvZ44=";
        };
      };

      packages = forAllSystems (pkgs: {
        nico = pkgs.nico;
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

      # The module, with services.nico.package defaulting to this flake's.
      nixosModules.default = { lib, pkgs, ... }: {
        imports = [ ./nixos-module ];
        services.nico.package = lib.mkDefault self.packages.${pkgs.stdenv.hostPlatform.system}.default;
      };
      nixosModules.nico = self.nixosModules.default;

      devShells = forAllSystems (pkgs: {
        default = pkgs.mkShell {
          packages = [ (pkgs.go_1_26 or pkgs.go) pkgs.gopls pkgs.etcd pkgs.gnumake pkgs.git pkgs.pkg-config pkgs.libvirt ];
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
