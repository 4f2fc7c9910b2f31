# Each VM test's Python script and node names, for
# tests/nixos/lint-scripts.py. Needs neither nixpkgs nor its lib: a
# script is a string that uses neither, and the nodes' definitions (which
# do) are never evaluated, only their names. So make nix-check checks the
# scripts on every machine.
#
#   nix-instantiate --eval --strict --json tests/nixos/eval/scripts.nix
let
  tests = import ../tests.nix;
  unused = what: throw "tests/nixos/eval/scripts.nix: a test's script or node names used ${what}; they must not, so that they can be checked without nixpkgs";
  load = file:
    let t = import file { self = unused "self"; lib = unused "lib"; };
    in { script = t.testScript; nodes = builtins.attrNames t.nodes; };
in
builtins.mapAttrs (_: load) (tests.checks // tests.optional)
