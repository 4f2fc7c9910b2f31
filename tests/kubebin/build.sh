#!/usr/bin/env bash
# build.sh VERSION OUTDIR builds kube-apiserver, kube-controller-manager,
# kube-scheduler, kubectl and kubelet of one Kubernetes release from the Go
# module proxy into OUTDIR.
#
# k8s.io/kubernetes replaces every staging module (k8s.io/api, apimachinery,
# client-go, ...) with a directory of its own tree, so it cannot be built
# with `go install`. This makes a scratch module that requires it, replaces
# each staging module with its same-numbered v0.X.Y release (the list is read
# from k8s.io/kubernetes's own go.mod), names the five commands in a tool
# block and builds them in one `go build tool`.
#
# The build is skipped when every binary in OUTDIR already reports VERSION.
# A cold build costs about 15 minutes and 3 GB of memory on 2 cores.
set -euo pipefail

tag=kubebin
. "$(dirname "$0")/../scratchmod/lib.sh"
scratch_args "v1.37.2 .cache/kube/v1.37.2" "v1.*.*" "look like v1.X.Y" "$@"
staging=v0.${version#v1.}
cmds="kube-apiserver kube-controller-manager kube-scheduler kubectl kubelet"

# The versions are read whole before they are matched: with pipefail, a
# `kubectl version | grep -q` fails when grep exits at the first line and
# kubectl, still writing its second, gets SIGPIPE (a finished build was
# once refused so).
have() {
	local c out
	for c in $cmds; do
		[ -x "$outdir/$c" ] || return 1
	done
	out=$("$outdir/kube-apiserver" --version 2>/dev/null) || return 1
	grep -qx "Kubernetes $version" <<<"$out" || return 1
	out=$("$outdir/kubectl" version --client 2>/dev/null) || return 1
	grep -qx "Client Version: $version" <<<"$out" || return 1
	out=$("$outdir/kubelet" --version 2>/dev/null) || return 1
	grep -qx "Kubernetes $version" <<<"$out"
}
if have; then
	echo "kubebin: $outdir already holds $version, skipping build"
	exit 0
fi

scratch_workdir
echo "kubebin: building Kubernetes $version in $work"
scratch_upstream k8s.io/kubernetes "$version"
{
	echo "module kubebin"
	echo
	echo "$goline"
	echo
	echo "require k8s.io/kubernetes $version"
	echo
	echo "replace ("
	sed -n 's#^[[:space:]]*\(k8s\.io/[a-z0-9-]*\) => \./staging/.*#\t\1 => \1 '"$staging"'#p' "$modfile"
	echo ")"
	echo
	echo "tool ("
	for c in $cmds; do echo "	k8s.io/kubernetes/cmd/$c"; done
	echo ")"
} >go.mod
echo "kubebin: go mod tidy"
go mod tidy
ldflags="-s -w"
for p in k8s.io/component-base/version k8s.io/client-go/pkg/version; do
	ldflags="$ldflags -X $p.gitVersion=$version -X $p.gitTreeState=clean"
done
echo "kubebin: go build tool ($cmds)"
mkdir -p bin
go build -trimpath -ldflags "$ldflags" -o bin/ tool
for c in $cmds; do mv "bin/$c" "$outdir/$c"; done

if ! have; then
	echo "kubebin: built binaries do not report $version:" >&2
	"$outdir/kube-apiserver" --version >&2 || true
	exit 1
fi
echo "kubebin: done: $cmds in $outdir ($version)"
