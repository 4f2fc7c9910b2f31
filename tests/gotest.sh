#!/usr/bin/env bash
# gotest.sh runs make test's Go tests, every package under the race
# detector, in two runs side by side:
#
#   - tests/integration's test binary, its tests six at a time
#     (-parallel 6). Its fleets' members are the newest etcd binary, so
#     its tests mostly wait (for elections, leases, the leader's passes)
#     and use about one and a half cores between them. It is built first,
#     so that the other run finds the packages they share compiled.
#   - a go test of every other package, three at a time (-p 3), their
#     tests three at a time (-parallel 3), tests/systemd (the longest, its
#     tests one after another) named first so that it starts first.
#
# tests/integration's output is kept in .cache/gotest/integration.out and
# printed after the other packages' results when it fails. The exit status
# is non-zero when either run fails. The environment (NICO_ETCD_BINARIES
# and the NICO_REQUIRE_ variables) is make test's.
set -euo pipefail
cd "$(dirname "$0")/.."

GO=${GO:-go}
out=.cache/gotest
mkdir -p "$out"
integration=github.com/homystack/nico/tests/integration

pkgs=$("$GO" list ./...)
"$GO" test -race -c -o "$out/integration.test" ./tests/integration/

began=$SECONDS
(
	cd tests/integration
	exec "../../$out/integration.test" -test.paniconexit0 -test.count=1 -test.timeout=35m -test.parallel=6
) >"$out/integration.out" 2>&1 &
pid=$!
# A stopped make test stops tests/integration too.
trap 'kill "$pid" 2>/dev/null || true' EXIT

rc=0
# shellcheck disable=SC2046 # one word a package
"$GO" test -race -count=1 -timeout 35m -p 3 -parallel 3 ./tests/systemd/ $(grep -vx "$integration" <<<"$pkgs") || rc=$?

irc=0
wait "$pid" || irc=$?
trap - EXIT
took=$((SECONDS - began))
if [ "$irc" -eq 0 ]; then
	echo "ok  	$integration	${took}s"
else
	cat "$out/integration.out"
	echo "FAIL	$integration	${took}s (exit status $irc; output above, kept in $out/integration.out)"
	rc=1
fi
exit "$rc"
