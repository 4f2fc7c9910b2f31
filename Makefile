# nico — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
BIN := bin
ETCD_VERSIONS := v3.6.16 v3.7.3
ETCD_CACHE := .cache/etcd
ETCD_BINARIES := $(foreach v,$(ETCD_VERSIONS),$(CURDIR)/$(ETCD_CACHE)/$(v)/etcd)
# SeaweedFS's weed (an S3 gateway) for the snapshot store's S3 tests.
WEED_VERSION := v0.0.0-20261109003541-7506e5f91cd6
WEED_CACHE := .cache/weed
KUBE_VERSION := v1.37.2
KUBE_CACHE := .cache/kube/$(KUBE_VERSION)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)

# make test fails rather than skips the nixos applier's real-Nix tests
# (pkg/apply, tests/systemd) when Nix cannot run (applytest.RequireNix).
test: export NICO_REQUIRE_NIX := 1
# make test fails rather than skips the status page's real-Chromium test
# (coordinator/statuspage) when chromium is missing; make deps installs it.
test: export NICO_REQUIRE_CHROMIUM := 1

.PHONY: all deps build etcd-binaries weed-binary kube-binaries e2e-kube test test-s3 test-short test-netns e2e-faults e2e-vm bench bench-scale demo vet fmt clean nix-check nix-docs cli-docs api-docs vendor-hash systemd-fixtures

all: build

# deps installs the Debian packages and Go modules the targets use.
deps:
	@.ci/deps.sh
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./agent/cmd/nico-agent ./agent/cmd/nico-etcd-proxy ./coordinator/cmd/nico-coordinator ./coordinator/cmd/nicoctl

# etcd binaries of two minor versions, built from the Go module proxy in a
# scratch module (go install of etcd fails on its replace directives).
etcd-binaries: deps
	@for v in $(ETCD_VERSIONS); do tests/etcdbin/build.sh $$v $(ETCD_CACHE)/$$v || exit 1; done

# weed-binary builds SeaweedFS's weed once into .cache/weed (a cold build
# costs about 8 minutes on 2 cores and leaves a 160 MB binary); pkg/snapshot's
# S3 store tests run it as a real S3-compatible server.
weed-binary: deps
	@tests/weedbin/build.sh $(WEED_VERSION) $(WEED_CACHE)

# kube-binaries: kube-apiserver, kube-controller-manager, kube-scheduler,
# kubectl and kubelet of KUBE_VERSION, built from the Go module proxy in a scratch module
# (tests/kubebin/build.sh) into KUBE_CACHE; skipped when they are there.
# A cold build costs minutes of CPU and ~3 GB of memory (docs/performance.md).
kube-binaries: deps
	tests/kubebin/build.sh $(KUBE_VERSION) $(KUBE_CACHE)

# e2e-kube runs the tests with a real Kubernetes control plane (tests/kubetest:
# kube-apiserver, controller-manager and scheduler on nico's etcd under a
# cluster's prefix, driven with the built kubectl; tests/kube: the sandbox
# fleet end to end; in both, real kubelets on Debian's containerd joining
# with a bootstrap kubeconfig, each test in a network namespace of its
# own), failing rather than skipping when the binaries are
# missing, then tests/kube's benchmark (apply to Ready beside the same
# generation with no cluster controller) into KUBE_BENCH.
# ETCD_PATCH_FROM is the etcd release tests/kube rolls from to the first of
# ETCD_VERSIONS (a patch roll under the Kubernetes API's load); it is built
# apart from ETCD_CACHE, so make test's binaries stay those two.
KUBE_BENCH ?= $(CURDIR)/kube-bench.out
ETCD_PATCH_FROM := v3.6.15
ETCD_PATCH_BINARY := $(CURDIR)/.cache/etcd-patch/$(ETCD_PATCH_FROM)/etcd
e2e-kube: kube-binaries etcd-binaries
	tests/etcdbin/build.sh $(ETCD_PATCH_FROM) $(dir $(ETCD_PATCH_BINARY))
	NICO_KUBE_BINARIES=$(CURDIR)/$(KUBE_CACHE) NICO_REQUIRE_KUBE_BINARIES=1 \
		NICO_ETCD_BINARIES=$$(echo $(ETCD_BINARIES) $(ETCD_PATCH_BINARY) | tr ' ' ':') NICO_REQUIRE_ETCD_BINARIES=1 \
		$(GO) test -race -count=1 -v -timeout 30m ./tests/kubetest/ ./tests/kube/
	set -o pipefail; load=$$(cut -d' ' -f1 /proc/loadavg); \
		NICO_KUBE_BINARIES=$(CURDIR)/$(KUBE_CACHE) NICO_REQUIRE_KUBE_BINARIES=1 \
		$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./tests/kube/ | tee $(KUBE_BENCH); \
		$(PERFPAGE) -block e2e-kube -command 'make e2e-kube' -load-start $$load $(KUBE_BENCH)

vet: deps
	$(GO) vet ./...

# staticcheck, the linter make check runs, pinned by version: go install
# MODULE@VERSION builds it in a throw-away module (nico's go.mod does not
# list it) into STATICCHECK_DIR; skipped when it is there. Per-directory
# exclusions, each with its reason, are in the staticcheck.conf files.
STATICCHECK_VERSION := v0.8.2
STATICCHECK_DIR := $(CURDIR)/.cache/staticcheck/$(STATICCHECK_VERSION)
STATICCHECK := $(STATICCHECK_DIR)/staticcheck
.PHONY: staticcheck-binary check
staticcheck-binary: deps
	@if ! "$(STATICCHECK)" -version 2>/dev/null | grep -qF '($(STATICCHECK_VERSION:v%=%))'; then \
		echo "staticcheck: go install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)"; \
		GOBIN=$(STATICCHECK_DIR) $(GO) install honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION); \
	fi

# check is the loop to run before a commit, in seconds and without etcd:
# gofmt, go vet, staticcheck, then the tests of CHECK_PACKAGES, the pure
# tiers (planners, config, API types and their generated reference, the
# small helpers), each well under a second (docs/performance.md). It
# refuses a CHECK_PACKAGES whose tests link an etcd server (embedded, or
# pkg/etcdtest's). make test runs all of these again under -race.
CHECK_PACKAGES := ./agent/internal/firstboot ./tests/perfpage ./pkg/api/... ./coordinator/internal/compaction ./pkg/config \
	./coordinator/internal/defrag ./coordinator/internal/etcdstatus ./pkg/etcdversion ./pkg/failpoint ./pkg/httpserve \
	./pkg/hypervisor/... ./pkg/kubeplan ./agent/internal/kubeprobe ./pkg/kubeversion ./pkg/libvirt \
	./pkg/logging ./coordinator/internal/machineclaim ./pkg/membership ./pkg/pki ./pkg/placement ./pkg/releasever \
	./pkg/rollout ./pkg/sdnotify ./pkg/secretbox ./pkg/store/memetcd ./pkg/store/storecontract \
	./pkg/switchguard ./coordinator/internal/versionroll
check: deps staticcheck-binary
	@bad=$$(gofmt -l $$(git ls-files --cached --others --exclude-standard '*.go')); \
		if [ -n "$$bad" ]; then echo "gofmt: not formatted (make fmt):"; echo "$$bad"; exit 1; fi
	$(GO) vet ./...
	$(STATICCHECK) ./...
	@etcd=$$($(GO) list -test -deps $(CHECK_PACKAGES) | grep -E '^go.etcd.io/etcd/server/v3/embed$$|/pkg/etcdtest$$' | paste -sd, -); \
		if [ -n "$$etcd" ]; then echo "check: a package of CHECK_PACKAGES links an etcd server ($$etcd); its tests belong to make test"; exit 1; fi
	$(GO) test -count=1 $(CHECK_PACKAGES)

# test runs the whole default suite under the race detector: unit,
# controller and integration tests against real etcd (embedded, and the etcd
# binaries of both versions), the network-namespace tests and, as root, the
# real-systemd tier (tests/systemd). Packages that start goroutines check
# for leaks (goleak) in their TestMain.
#
# tests/gotest.sh runs them: tests/integration's test binary, its tests six
# at a time, beside a go test of the other packages, three at a time, their
# tests three at a time. Most tests wait on etcd (elections, leases, the
# leader's passes) far more than they compute: tests/integration's fleets
# run their members as the newest etcd binary, outside the race detector,
# and take about one and a half cores with six tests at a time, the other
# packages together about half a core (docs/performance.md). Within a
# package, the tests that must run alone (a whole-cluster rotation, a
# goroutine leak check, a package setting or an environment variable
# changed) do not call t.Parallel, and run before the others.
test: etcd-binaries check nix-check
	@echo "make test: tests/integration runs beside the other packages; its result prints last"
	NICO_ETCD_BINARIES=$$(echo $(ETCD_BINARIES) | tr ' ' ':') NICO_REQUIRE_ETCD_BINARIES=1 GO=$(GO) tests/gotest.sh

# test-s3 runs the snapshot store's S3 tests (pkg/snapshot) and nicoctl
# restore --from a snapshot stored in S3 against a real
# S3-compatible server, SeaweedFS's weed (make weed-binary), failing rather
# than skipping when it is missing. Its cold build costs about 8 minutes, so
# it is not part of make test (where those tests skip, saying so); CI runs
# it (.ci/run).
test-s3: weed-binary
	NICO_WEED_BINARY=$(CURDIR)/$(WEED_CACHE)/weed NICO_REQUIRE_WEED=1 \
		$(GO) test -race -count=1 -v -run 'S3' ./pkg/snapshot/
	NICO_WEED_BINARY=$(CURDIR)/$(WEED_CACHE)/weed NICO_REQUIRE_WEED=1 \
		$(GO) test -race -count=1 -v -run 'TestRestoreFromS3Store' ./coordinator/cmd/nicoctl/internal/ctl/

# test-netns runs the gossip partition and advertise tests across network namespaces
# (ip netns, veth, a bridge, iptables DROP); it needs root and skips, saying
# so, otherwise. It takes about 10 s, so make test runs it too when root.
test-netns: deps
	$(GO) test -count=1 -v -run 'TestPartition|TestAdvertiseWithoutPrivateAddress' ./tests/netns/

# e2e-faults runs the whole fault matrix of tests/faults (root): a network
# namespace per node, real agents (exec etcd runtime) and coordinators built
# with -tags failpoints; the coordinator leader killed at every failpoint of
# a join, a removal and a rollout step, an agent killed before it switches
# a generation, the etcd leader cut off during a promote, a learner cut off
# until its start timeout, a minority partition during a rollout (and one
# with the embedded runtime), a full disk, a database past its quota
# (NOSPACE), a wiped voter, a node whose seeds
# are gone (docs/faults.md), a learner killed before it catches up, a one-way
# partition, an agent killed at its removal failpoint, nicoctl restore killed
# after every step of its journal and resumed, a node's clock stepped
# (a test-only hook), the join failpoints, learner kill and one-way partition
# on the embedded runtime too, and a seeded random sequence of faults and
# rollouts (NICO_FAULTS_SEED=n replays one), besides the smoke
# scenarios make test runs. It writes the summary table (and, for a history
# that is not linearizable, porcupine's visualisation) to FAULTS_REPORT.
FAULTS_REPORT ?= $(CURDIR)/faults-report.md
e2e-faults: etcd-binaries
	@rm -f $(FAULTS_REPORT)
	NICO_ETCD_BINARIES=$$(echo $(ETCD_BINARIES) | tr ' ' ':') NICO_REQUIRE_ETCD_BINARIES=1 \
		NICO_FAULTS_E2E=1 NICO_FAULTS_REPORT=$(FAULTS_REPORT) \
		$(GO) test -count=1 -v -timeout 40m ./tests/faults/
	@echo "summary: $(FAULTS_REPORT)"; cat $(FAULTS_REPORT)

# e2e-vm boots real VMs (libvirtd + qemu; software emulation unless a probe
# guest boots under /dev/kvm) inside a network namespace and checks that they
# join the cluster by themselves, as workers and as the etcd voters an
# EtcdCluster with a machine pool asks for (a destroyed one replaced); it
# reports the time from pool scale-up to the node registered, voters 1 -> 3
# with VMs, and the domain type it chose.
# Root; installs libvirt, qemu, a Debian kernel and busybox-static
# (tests/e2evm/deps.sh). Not part of make test: it takes several minutes.
e2e-vm: deps
	tests/e2evm/run.sh

# fuzz runs every fuzz target (each func FuzzX in a _test.go) for FUZZTIME;
# make test already runs their seed corpora (f.Add, testdata/fuzz) as tests.
# A failure leaves its input in testdata/fuzz/FuzzX/: commit it with the fix.
FUZZTIME ?= 30s
.PHONY: fuzz
fuzz: deps
	@for f in $$(git ls-files --cached --others --exclude-standard '*_test.go' | xargs grep -l '^func Fuzz'); do \
		for name in $$(sed -n 's/^func \(Fuzz[A-Za-z0-9_]*\)(.*/\1/p' $$f); do \
			echo "== ./$$(dirname $$f) $$name ($(FUZZTIME))"; \
			$(GO) test -run '^$$' -fuzz "^$$name$$" -fuzztime $(FUZZTIME) ./$$(dirname $$f) || exit 1; \
		done; \
	done

# test-short runs only the fast tiers (planners, stores, config).
test-short: deps
	$(GO) test -count=1 -short ./pkg/...

# bench measures join-to-voter latency against the kubeadm-style baseline
# and client availability through joins and removals. pipefail: a failed
# benchmark fails make bench, not only tee.
# Each benchmark target writes its figures into docs/performance.md's block
# of its name (tests/perfpage), with the command, the date, the machine and
# the load before and after; a run that failed writes nothing.
PERFPAGE = $(GO) run ./tests/perfpage -page docs/performance.md
bench: etcd-binaries
	set -o pipefail; load=$$(cut -d' ' -f1 /proc/loadavg); \
		$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 90m ./tests/bench/ | tee bench.out; \
		$(PERFPAGE) -block bench -command 'make bench' -load-start $$load bench.out
	$(MAKE) bench-scale

# bench-scale measures nico at fleet size: a real coordinator and three
# etcd members against 100, 300 and 1 000 machines' agents (tests/scale),
# and a gossip mesh over several processes (tests/meshscale), one package
# after the other (-p 1): each measures what the whole machine gives it.
bench-scale: etcd-binaries
	set -o pipefail; load=$$(cut -d' ' -f1 /proc/loadavg); \
		$(GO) test -p 1 -count=1 -run '^$$' -bench . -benchtime 1x -timeout 90m ./tests/scale/ ./tests/meshscale/ | tee bench-scale.out; \
		$(PERFPAGE) -block bench-scale -command 'make bench-scale' -load-start $$load bench-scale.out

# demo: five agents as separate processes on loopback, grown through
# learners and shrunk by removing two nodes, the etcd leader among them.
# KEEP=1 leaves the cluster running afterwards (Ctrl-C stops it) and prints
# the nicoctl command line to reach it.
# demo builds the programs without cgo into bin/demo (the demo defines no
# VM, so no libvirt) and needs Go and git only, not make deps' packages.
demo:
	@.ci/deps.sh demo
	$(GO) mod download
	@mkdir -p $(BIN)/demo
	CGO_ENABLED=0 $(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/demo/ ./agent/cmd/nico-agent ./coordinator/cmd/nico-coordinator ./coordinator/cmd/nicoctl
	$(GO) run ./tests/demo -bin $(BIN)/demo$(if $(KEEP), -keep-running)

# nixpkgs' lib, to evaluate the NixOS module without nixpkgs: NIXPKGS_LIB,
# else <nixpkgs> on NIX_PATH, else a copy in .cache/nixpkgs-lib (never
# committed). Without any, nix-check parses the .nix files only, and says so.
NIXPKGS_LIB ?= $(wildcard $(CURDIR)/.cache/nixpkgs-lib/lib)

# nix-check: every .nix file parses; the module evaluates with lib (units,
# YAML, assertions, types); docs/options.md is current; vendorHash matches.
nix-check: deps
	NIXPKGS_LIB=$(NIXPKGS_LIB) tests/nixos/nix-check.sh check

# cli-docs regenerates docs/cli.md, nicoctl's reference, from its help texts
# (TestReferenceUpToDate fails when they drift apart).
cli-docs: deps
	$(GO) run ./coordinator/cmd/nicoctl/internal/clidocs > docs/cli.md.tmp && mv docs/cli.md.tmp docs/cli.md

# api-docs regenerates docs/api.md, every API object's fields with their
# defaults and validation, from pkg/api's types and doc comments, and the
# schema the NixOS module's services.nico.objects options are made from
# (TestReferenceUpToDate and TestNixSchemaUpToDate in pkg/api/internal/apidocs
# fail when they drift).
api-docs: deps
	$(GO) run ./pkg/api/internal/apidocs > docs/api.md.tmp && mv docs/api.md.tmp docs/api.md
	$(GO) run ./pkg/api/internal/apidocs -nix-schema > nixos-module/lib/api-schema.json.tmp && mv nixos-module/lib/api-schema.json.tmp nixos-module/lib/api-schema.json

# nix-docs regenerates docs/options.md from nixos-module/.
nix-docs: deps
	NIXPKGS_LIB=$(NIXPKGS_LIB) tests/nixos/nix-check.sh docs

# systemd-fixtures renders the unit files (and the files they name) of the
# real-systemd tier's hosts from nixos-module/ into tests/systemd/testdata;
# the tier runs those committed fixtures everywhere, and nix-check fails
# when they differ from what the module renders (wherever lib is present).
systemd-fixtures: deps
	NIXPKGS_LIB=$(NIXPKGS_LIB) tests/systemd/render/fixtures.sh write

# vendor-hash writes flake.nix's vendorHash: go mod vendor + nix hash path,
# offline (the Nix build itself needs network).
vendor-hash: deps
	tests/nixos/nix-check.sh vendor-hash

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) bench.out kube-bench.out faults-report.md
