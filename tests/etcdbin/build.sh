#!/usr/bin/env bash
# build.sh VERSION OUTDIR builds the etcd and etcdctl binaries of one etcd
# release from the Go module proxy into OUTDIR.
#
# `go install go.etcd.io/etcd/server/v3@VERSION` fails because etcd's go.mod
# files carry replace directives, so this makes a scratch module that requires
# both main modules, tidies it and builds from there.
#
# The build is skipped when OUTDIR/etcd already reports VERSION.
set -euo pipefail

if [ $# -ne 2 ]; then
	echo "usage: $0 VERSION OUTDIR   (e.g. $0 v3.6.16 .cache/etcd/v3.6.16)" >&2
	exit 2
fi
version=$1
outdir=$2
case "$version" in
v3.*) ;;
*)
	echo "build.sh: VERSION must look like v3.X.Y, got \"$version\"" >&2
	exit 2
	;;
esac

mkdir -p "$outdir"
outdir=$(cd "$outdir" && pwd)

# Read whole, then matched: `etcd --version | grep -q` under pipefail
# fails when grep exits at the first line while etcd still writes.
if [ -x "$outdir/etcd" ] && [ -x "$outdir/etcdctl" ] &&
	[ "$("$outdir/etcd" --version 2>/dev/null | sed -n 's/^etcd Version: //p')" = "${version#v}" ]; then
	echo "etcdbin: $outdir/etcd is already $version, skipping build"
	exit 0
fi

work=$(mktemp -d "${TMPDIR:-/tmp}/etcdbin.XXXXXX")
trap 'rm -rf "$work"' EXIT

export GOFLAGS=-mod=mod
# GOPATH, GOCACHE, GOPROXY and friends come from the caller's environment.

cd "$work"
echo "etcdbin: building etcd $version in $work"
cat >go.mod <<GOMOD
module etcdbin

go 1.24
GOMOD
cat >tools.go <<'TOOLS'
//go:build tools

package tools

import (
	_ "go.etcd.io/etcd/etcdctl/v3"
	_ "go.etcd.io/etcd/server/v3"
)
TOOLS

echo "etcdbin: go get go.etcd.io/etcd/server/v3@$version go.etcd.io/etcd/etcdctl/v3@$version"
go get "go.etcd.io/etcd/server/v3@$version" "go.etcd.io/etcd/etcdctl/v3@$version"
echo "etcdbin: go mod tidy"
go mod tidy
echo "etcdbin: go build etcd"
go build -trimpath -o "$outdir/etcd.tmp" go.etcd.io/etcd/server/v3
mv "$outdir/etcd.tmp" "$outdir/etcd"
echo "etcdbin: go build etcdctl"
go build -trimpath -o "$outdir/etcdctl.tmp" go.etcd.io/etcd/etcdctl/v3
mv "$outdir/etcdctl.tmp" "$outdir/etcdctl"

got=$("$outdir/etcd" --version | sed -n 's/^etcd Version: //p')
if [ "$got" != "${version#v}" ]; then
	echo "etcdbin: built etcd reports version \"$got\", want \"${version#v}\"" >&2
	exit 1
fi
echo "etcdbin: done: $outdir/etcd $outdir/etcdctl ($version)"
