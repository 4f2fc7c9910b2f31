#!/usr/bin/env bash
# build.sh VERSION OUTDIR builds SeaweedFS's `weed` binary (whose `weed
# server -s3` / `weed mini` serve an S3-compatible gateway) of one module
# version from the Go module proxy into OUTDIR. The snapshot store's S3
# contract tests run against it (pkg/snapshot, NICO_WEED_BINARY).
#
# SeaweedFS is served only as a pseudo-version and carries replace
# directives in its go.mod, so `go install` refuses it. This makes a scratch
# module that requires it, copies each replace that names a module version
# (not a local path), names weed in a tool block and builds it.
#
# The build is skipped when OUTDIR/weed exists and OUTDIR/VERSION holds
# VERSION.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 VERSION OUTDIR   (e.g. $0 v0.0.0-20261109003541-7506e5f91cd6 .cache/weed)" >&2
	exit 2
fi
version=$1
outdir=$2
case "$version" in
v*) ;;
*)
	echo "build.sh: VERSION must be a module version (v0.0.0-DATE-COMMIT), got \"$version\"" >&2
	exit 2
	;;
esac

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)
if [ -x "$outdir/weed" ] && [ "$(cat "$outdir/VERSION" 2>/dev/null)" = "$version" ]; then
	echo "weedbin: $outdir/weed is already $version, skipping build"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/weedbin.XXXXXX")
trap 'rm -rf "$work"' EXIT
export GOFLAGS=-mod=mod CGO_ENABLED=0

cd "$work"
echo "weedbin: building github.com/seaweedfs/seaweedfs $version in $work"
modfile=$(go mod download -json "github.com/seaweedfs/seaweedfs@$version" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
[ -n "$modfile" ] || { echo "weedbin: cannot download github.com/seaweedfs/seaweedfs@$version" >&2; exit 1; }
goline=$(grep -m1 '^go ' "$modfile")
{
	echo "module weedbin"
	echo
	echo "$goline"
	echo
	echo "require github.com/seaweedfs/seaweedfs $version"
	echo
	grep -E '^replace [^ ]+ => [^ ./][^ ]* v[^ ]+$' "$modfile" || true
	echo
	echo "tool github.com/seaweedfs/seaweedfs/weed"
} >go.mod
echo "weedbin: go mod tidy"
go mod tidy
echo "weedbin: go build weed"
go build -trimpath -ldflags "-s -w" -o "$outdir/weed.tmp" github.com/seaweedfs/seaweedfs/weed
mv "$outdir/weed.tmp" "$outdir/weed"
echo "$version" >"$outdir/VERSION"
"$outdir/weed" version
echo "weedbin: done: $outdir/weed ($version)"
