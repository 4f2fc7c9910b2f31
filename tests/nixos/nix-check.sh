#!/usr/bin/env bash
# Checks of the Nix code that run without nixpkgs and without network
# (make nix-check, part of make test), with Debian's nix-bin (Nix >= 2.8):
#
#   1. nix-instantiate --parse on every .nix file of the repository; the
#      VM tests' Python scripts (tests/nixos/eval/scripts.nix, which needs
#      no nixpkgs) checked as the test driver does and a little more
#      (lint-scripts.py: parse, mypy against tests/nixos/driver-stub,
#      pyflakes, and the driver-usage rules of script_rules.py, whose own
#      cases script_rules_test.py runs first);
#   2. when nixpkgs' lib is found (NIXPKGS_LIB=/path/to/lib, or <nixpkgs>
#      on NIX_PATH): nixos-module/ evaluated with lib.evalModules against
#      tests/nixos/eval/stubs.nix (tests/nixos/eval/checks.nix), the
#      flake's outputs that need no nixpkgs (eval/flake-outputs.nix), the
#      example flakes examples/k3s and examples/kubernetes on every machine
#      of pkg/clusternix's sample cluster.nix files (eval/examples.nix), every
#      VM test's node configurations (eval/vm-tests.nix) and the files the
#      module renders for them loaded by nico's own config loaders
#      (tests/nixos/loadconfig), docs/options.md compared with the
#      options it renders, and the real-systemd tier's unit fixtures
#      (tests/systemd/testdata) compared with what the module renders
#      (tests/systemd/render/fixtures.sh). Without lib (a fresh machine: the copy in
#      .cache/nixpkgs-lib is not in the repository) step 2 is skipped and
#      the check says so; it does not fail;
#   3. the flake's vendorHash compared with `go mod vendor` + `nix hash
#      path` of the working tree, when the Go module cache has every module
#      (a mismatch fails only with NICO_STRICT_VENDOR_HASH=1; otherwise it
#      is reported with the fix: make vendor-hash).
#
# Usage: tests/nixos/nix-check.sh [check|docs|vendor-hash]
set -euo pipefail
cd "$(dirname "$0")/../.."
mode=${1:-check}
nixflags=(--extra-experimental-features nix-command)

command -v nix-instantiate >/dev/null || { echo "nix-check: nix-instantiate is not on PATH; run .ci/deps.sh (Debian package nix-bin)" >&2; exit 1; }

# find_lib prints the path of nixpkgs' lib, or nothing.
find_lib() {
  if [ -n "${NIXPKGS_LIB:-}" ]; then
    if [ -f "$NIXPKGS_LIB/lib/default.nix" ]; then echo "$(cd "$NIXPKGS_LIB/lib" && pwd)"; return; fi
    if [ -f "$NIXPKGS_LIB/default.nix" ]; then echo "$(cd "$NIXPKGS_LIB" && pwd)"; return; fi
    echo "nix-check: NIXPKGS_LIB=$NIXPKGS_LIB holds no lib/default.nix" >&2
    return
  fi
  local p
  if p=$(nix-instantiate --find-file nixpkgs/lib 2>/dev/null) && [ -f "$p/default.nix" ]; then echo "$p"; fi
}

render_docs() { # $1: lib path
  nix-instantiate --eval --strict --json tests/nixos/eval -A optionsDoc --arg lib "import $1" |
    python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin))'
}

# vendor_hash prints the NAR hash of `go mod vendor` of the working tree, or
# fails when the module cache lacks a module (no network is used).
vendor_hash() {
  local tmp; tmp=$(mktemp -d); trap 'rm -rf "$tmp"' RETURN
  GOFLAGS=-mod=mod GOPROXY=off go mod vendor -o "$tmp/vendor" >/dev/null 2>"$tmp/err" || { cat "$tmp/err" >&2; return 1; }
  nix "${nixflags[@]}" hash path "$tmp/vendor"
}

flake_vendor_hash() { sed -n 's/^ *vendorHash = "\(sha256-[^"]*\)";.*/\1/p' flake.nix | head -1; }

case $mode in
docs)
  lib=$(find_lib); [ -n "$lib" ] || { echo "nix-docs: needs nixpkgs' lib: set NIXPKGS_LIB" >&2; exit 1; }
  mkdir -p docs && render_docs "$lib" > docs/options.md
  echo "nix-docs: wrote docs/options.md"
  exit 0 ;;
vendor-hash)
  h=$(vendor_hash) || { echo "vendor-hash: go mod vendor failed offline; run go mod download first" >&2; exit 1; }
  sed -i "s|^\( *vendorHash = \)\"[^\"]*\";|\1\"$h\";|" flake.nix
  echo "vendor-hash: flake.nix vendorHash = $h"
  exit 0 ;;
check) ;;
*) echo "usage: $0 [check|docs|vendor-hash]" >&2; exit 2 ;;
esac

n=0
while IFS= read -r f; do
  nix-instantiate --parse "$f" >/dev/null || { echo "nix-check: $f does not parse" >&2; exit 1; }
  n=$((n + 1))
done < <(git ls-files --cached --others --exclude-standard '*.nix' | while read -r f; do [ -f "$f" ] && echo "$f"; done)
echo "nix-check: $n .nix files parse"
python3 tests/nixos/script_rules_test.py >/dev/null 2>&1 || { python3 tests/nixos/script_rules_test.py >&2 || true; echo "nix-check: tests/nixos/script_rules_test.py failed (above)" >&2; exit 1; }
echo "nix-check: the VM scripts' driver-usage rules pass their own cases (script_rules_test.py)"
# The VM tests' scripts need no nixpkgs: checked everywhere.
scripts=$(mktemp)
nix-instantiate --eval --strict --json tests/nixos/eval/scripts.nix > "$scripts"
python3 tests/nixos/lint-scripts.py "$scripts" || { rm -f "$scripts"; exit 1; }
rm -f "$scripts"

lib=$(find_lib)
if [ -z "$lib" ]; then
  echo "nix-check: NOTE nixpkgs' lib not found (set NIXPKGS_LIB=/path/to/nixpkgs/lib or put nixpkgs on NIX_PATH):"
  echo "nix-check: NOTE ran the parse and script checks only; the module, the VM tests' nodes, the example flakes, the rendered configs and docs/options.md were NOT checked"
else
  echo "nix-check: evaluating nixos-module/ with $lib"
  nix-instantiate --eval --strict tests/nixos/eval -A checks --arg lib "import $lib"
  nix-instantiate --eval --strict tests/nixos/eval/flake-outputs.nix --arg lib "import $lib"
  # The example flakes, also as nico writes them: cluster.nix beside flake.nix.
  copies=$(mktemp -d)
  # k3s on nico's etcd goes through the namespacing proxy (copySample in examples.nix).
  cp -r examples/k3s "$copies/" && cp pkg/clusternix/testdata/nico-namespaced.cluster.nix "$copies/k3s/cluster.nix"
  cp -r examples/kubernetes "$copies/" && cp pkg/clusternix/testdata/nico-ha.cluster.nix "$copies/kubernetes/cluster.nix"
  nix-instantiate --eval --strict tests/nixos/eval/examples.nix --arg lib "import $lib" --argstr copies "$copies" || { rm -rf "$copies"; exit 1; }
  rm -rf "$copies"
  if err=$(nix-instantiate --eval --strict tests/nixos/eval -A badHostName --arg lib "import $lib" 2>&1); then
    echo "nix-check: a host named Cp_1 evaluated ($err); want an error asking for services.nico.settings.name" >&2; exit 1
  elif ! grep -q 'set services.nico.settings.name, for instance to "cp-1"' <<<"$err"; then
    echo "$err" >&2; echo "nix-check: a host named Cp_1 fails without saying to set services.nico.settings.name (above)" >&2; exit 1
  fi
  echo "nix-check: a host name that is no DNS label fails, asking for services.nico.settings.name"
  if err=$(nix-instantiate --eval --strict tests/nixos/eval -A badObject --arg lib "import $lib" 2>&1); then
    echo "nix-check: a machine pool with count \"two\" evaluated ($err); want a type error naming the option" >&2; exit 1
  elif ! grep -q "services.nico.objects.machinePools.web.count" <<<"$err"; then
    echo "$err" >&2; echo "nix-check: a machine pool with count \"two\" fails without naming services.nico.objects.machinePools.web.count (above)" >&2; exit 1
  fi
  echo "nix-check: a declared object of the wrong type fails, naming its option"
  nix-instantiate --eval --strict tests/nixos/eval/vm-tests.nix -A checks --arg lib "import $lib"
  configs=$(mktemp); trap 'rm -f "$configs"' EXIT
  nix-instantiate --eval --strict --json tests/nixos/eval/vm-tests.nix -A configs --arg lib "import $lib" > "$configs"
  manifest=$(mktemp); trap 'rm -f "$configs" "$manifest"' EXIT
  nix-instantiate --eval --strict --json tests/nixos/eval -A fleetManifest --arg lib "import $lib" |
    python3 -c 'import json,sys; sys.stdout.write(json.load(sys.stdin))' > "$manifest"
  NICO_NIX_CONFIGS=$configs NICO_NIX_MANIFEST=$manifest go test -count=1 ./tests/nixos/loadconfig/ >/dev/null ||
    { NICO_NIX_CONFIGS=$configs NICO_NIX_MANIFEST=$manifest go test -count=1 ./tests/nixos/loadconfig/ >&2 || true; echo "nix-check: tests/nixos/loadconfig failed (above): nico-agent or nico-coordinator refuses a file the module renders, the agent refuses the manifest of declared objects, or the test does not build" >&2; exit 1; }
  echo "nix-check: the agent and coordinator files the module renders for $(python3 -c 'import json,sys; print(len(json.load(open(sys.argv[1]))))' "$configs") hosts load with pkg/config"
  if ! diff -u docs/options.md <(render_docs "$lib") >/dev/null; then
    diff -u docs/options.md <(render_docs "$lib") | head -40 >&2
    echo "nix-check: docs/options.md is out of date; run make nix-docs" >&2
    exit 1
  fi
  echo "nix-check: docs/options.md is up to date"
  NIXPKGS_LIB=$lib tests/systemd/render/fixtures.sh check
fi

want=$(flake_vendor_hash)
if got=$(vendor_hash 2>/dev/null); then
  if [ "$got" = "$want" ]; then
    echo "nix-check: flake.nix vendorHash matches go mod vendor ($got)"
  elif [ "${NICO_STRICT_VENDOR_HASH:-}" = 1 ]; then
    echo "nix-check: flake.nix vendorHash is $want, go mod vendor hashes to $got; run make vendor-hash" >&2
    exit 1
  else
    echo "nix-check: WARNING flake.nix vendorHash is $want but go mod vendor of this tree hashes to $got; run make vendor-hash (NICO_STRICT_VENDOR_HASH=1 makes this fail)"
  fi
else
  echo "nix-check: go mod vendor cannot run offline here (module cache incomplete); vendorHash not checked"
fi
