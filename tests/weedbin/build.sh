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

tag=weedbin
. "$(dirname "$0")/../scratchmod/lib.sh"
scratch_args "v0.0.0-20261109003541-7506e5f91cd6 .cache/weed" "v*" "be a module version (v0.0.0-DATE-COMMIT)" "$@"
if [ -x "$outdir/weed" ] && [ "$(cat "$outdir/VERSION" 2>/dev/null)" = "$version" ]; then
	echo "weedbin: $outdir/weed is already $version, skipping build"
	exit 0
fi

scratch_workdir
echo "weedbin: building github.com/seaweedfs/seaweedfs $version in $work"
scratch_upstream github.com/seaweedfs/seaweedfs "$version"
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
