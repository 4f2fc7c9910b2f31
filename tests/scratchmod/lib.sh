# lib.sh holds what the scratch-module builders (tests/kubebin/build.sh,
# tests/weedbin/build.sh) share. A module whose go.mod carries replace
# directives cannot be built with `go install`; each builder writes a
# scratch module that requires it and builds from there. Source this file
# after setting `tag` (the prefix of every message, e.g. kubebin).

# scratch_args USAGE_EXAMPLE PATTERN WHAT "$@" checks for VERSION and
# OUTDIR, VERSION matching the shell PATTERN, and sets version and outdir
# (made absolute and created).
scratch_args() {
	local example=$1 pattern=$2 what=$3
	shift 3
	if [ $# -ne 2 ]; then
		echo "usage: $0 VERSION OUTDIR   (e.g. $0 $example)" >&2
		exit 2
	fi
	version=$1
	# shellcheck disable=SC2254 # the pattern is meant to be a pattern
	case "$version" in
	$pattern) ;;
	*)
		echo "build.sh: VERSION must $what, got \"$version\"" >&2
		exit 2
		;;
	esac
	mkdir -p "$2"
	outdir=$(cd "$2" && pwd)
}

# scratch_workdir makes a throw-away directory, removed on exit, and enters
# it with module mode forced and cgo off.
scratch_workdir() {
	work=$(mktemp -d "${TMPDIR:-/tmp}/$tag.XXXXXX")
	# shellcheck disable=SC2064 # expand $work now
	trap "rm -rf '$work'" EXIT
	export GOFLAGS=-mod=mod CGO_ENABLED=0
	cd "$work"
}

# scratch_upstream MODULE VERSION downloads MODULE@VERSION and sets modfile
# to its go.mod and goline to that file's go directive.
scratch_upstream() {
	modfile=$(go mod download -json "$1@$2" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",$/\1/p')
	if [ -z "$modfile" ]; then
		echo "$tag: cannot download $1@$2" >&2
		exit 1
	fi
	goline=$(grep -m1 '^go ' "$modfile")
}
