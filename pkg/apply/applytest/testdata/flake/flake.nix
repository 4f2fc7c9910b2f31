# The nixos applier's test flake: no inputs and no nixpkgs, so that Nix
# builds it offline. nixosConfigurations.<host>.config.system.build.toplevel
# is a builtins.derivation that /bin/sh builds; its bin/switch-to-configuration
# does what generation.nix (one per commit of the test's repository) says.
#
# local.nix is not committed: the applier writes it as an additional file.
# It names the system, the host, and where the machine under test keeps
# its state: { system, host, state, currentSystem }.
{
  description = "nico: the nixos applier's test flake";

  outputs = { self }:
    let
      local = import ./local.nix;
      gen = import ./generation.nix;

      # Run by the applier (under systemd-run) with the operation as $1.
      # Every run is logged to state/activations as "<generation> <op>".
      # A generation whose activation fails switches the current-system
      # link first, as a half-done real activation can, then exits 4.
      # generation.nix: { name, activation, health, kernel, failUnit, waitFor }.
      switch = ''
        op=$1
        echo "${gen.name} $op" >> ${local.state}/activations
        case "$op" in
          switch|test|boot|dry-activate) ;;
          *) echo "usage: switch-to-configuration switch|test|boot|dry-activate" >&2; exit 1 ;;
        esac
        [ "$op" = boot ] && exit 0
        # A slow activation: it waits for the test to create the file.
        if [ -n "${gen.waitFor}" ]; then
          while [ ! -e ${gen.waitFor} ]; do sleep 0.05; done
        fi
        ln -sfn "$top" ${local.currentSystem}
        if [ "${gen.activation}" = fails ]; then
          echo "switch-to-configuration: activating ${gen.name} failed" >&2
          exit 4
        fi
        echo ${gen.health} > ${local.state}/health
        # A unit that fails, for the applier's failed-units check (needs
        # a systemd: tests/systemd).
        if [ -n "${gen.failUnit}" ]; then
          systemd-run --unit=${gen.failUnit} --wait --quiet /bin/false || true
        fi
      '';

      toplevel = builtins.derivation {
        name = "nixos-system-${local.host}-${gen.name}";
        inherit (local) system;
        builder = "/bin/sh";
        # No coreutils on PATH in a builder: absolute paths to the host's.
        args = [ "-c" ''
          set -eu
          /bin/mkdir -p $out/bin
          /bin/ln -s /run/nico-test-kernel-${gen.kernel} $out/kernel
          { printf '#!/bin/sh\nset -eu\ntop=%s\n' "$out"; printf '%s' "$switch"; } > $out/bin/switch-to-configuration
          /bin/chmod 0555 $out/bin/switch-to-configuration
        '' ];
        inherit switch;
      };
    in
    {
      nixosConfigurations.${local.host}.config.system.build.toplevel = toplevel;
    };
}
