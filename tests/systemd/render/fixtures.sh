#!/usr/bin/env bash
# Renders the real-systemd tier's fixtures (tests/systemd/testdata) from
# nixos-module/ with nixpkgs' lib (tests/systemd/render/default.nix):
#
#   write [DIR]  replace testdata/ (or DIR) with the rendered files
#                (make systemd-fixtures); NICO_SYSTEMD_MODULE=/path renders
#                another copy of nixos-module/, for a trial run of the tier
#                with NICO_SYSTEMD_FIXTURES=DIR
#   check  fail when testdata/ differs from what the module renders now
#          (make nix-check, wherever lib is present)
#
# Usage: NIXPKGS_LIB=/path/to/nixpkgs/lib tests/systemd/render/fixtures.sh write [DIR]|check
set -euo pipefail
cd "$(dirname "$0")/../../.."
mode=${1:-}
dest=${2:-tests/systemd/testdata}
lib=${NIXPKGS_LIB:-}
[ -f "$lib/default.nix" ] || lib=$lib/lib
[ -f "$lib/default.nix" ] || { echo "systemd-fixtures: needs nixpkgs' lib: set NIXPKGS_LIB (now '${NIXPKGS_LIB:-}')" >&2; exit 1; }
args=(--arg lib "import $lib")
[ -z "${NICO_SYSTEMD_MODULE:-}" ] || args+=(--arg module "$(cd "$NICO_SYSTEMD_MODULE" && pwd)")
out=$(mktemp -d); trap 'rm -rf "$out"' EXIT
for attr in files fixture; do
  nix-instantiate --eval --strict --json tests/systemd/render -A "$attr" "${args[@]}" > "$out/$attr.json"
done
python3 - "$out" <<'PY'
import json, os, sys
out = sys.argv[1]
root = os.path.join(out, "testdata")
for path, text in json.load(open(os.path.join(out, "files.json"))).items():
    dst = os.path.join(root, path)
    os.makedirs(os.path.dirname(dst), exist_ok=True)
    with open(dst, "w") as f:
        f.write(text)
with open(os.path.join(root, "fixture.json"), "w") as f:
    json.dump(json.load(open(os.path.join(out, "fixture.json"))), f, indent=2, sort_keys=True)
    f.write("\n")
PY
case $mode in
write)
  rm -rf "$dest"
  cp -r "$out/testdata" "$dest"
  echo "systemd-fixtures: wrote $dest ($(find "$dest" -type f | wc -l) files)" ;;
check)
  if ! diff -ru tests/systemd/testdata "$out/testdata" > "$out/diff"; then
    head -60 "$out/diff" >&2
    echo "nix-check: tests/systemd/testdata is not what nixos-module/ renders now; run make systemd-fixtures and commit it" >&2
    exit 1
  fi
  echo "nix-check: tests/systemd/testdata matches the units nixos-module/ renders" ;;
*) echo "usage: $0 write|check" >&2; exit 2 ;;
esac
