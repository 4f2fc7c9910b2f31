# Type stub of nixpkgs' NixOS test driver (nixos/lib/test-driver), the part
# a testScript can reach. Written from the driver's sources for
# tests/nixos/lint-scripts.py, which type-checks every VM test's script
# with mypy against it, as runNixOSTest does (skipTypeCheck = false).
