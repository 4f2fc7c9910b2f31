# nico — see README.md. Every target installs what it needs.
SHELL := /bin/bash
GO ?= go
BIN := bin
ETCD_VERSIONS := v3.6.16 v3.7.3
ETCD_CACHE := .cache/etcd
ETCD_BINARIES := $(foreach v,$(ETCD_VERSIONS),$(CURDIR)/$(ETCD_CACHE)/$(v)/etcd)
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
LDFLAGS := -X main.Version=$(VERSION)

.PHONY: all deps build etcd-binaries test test-short bench demo vet fmt clean

all: build

# deps installs the Debian packages and Go modules the targets use.
deps:
	@.ci/deps.sh
	$(GO) mod download

build: deps
	@mkdir -p $(BIN)
	$(GO) build -ldflags '$(LDFLAGS)' -o $(BIN)/ ./agent/cmd/nico-agent ./coordinator/cmd/nico-coordinator ./coordinator/cmd/nicoctl

# etcd binaries of two minor versions, built from the Go module proxy in a
# scratch module (go install of etcd fails on its replace directives).
etcd-binaries: deps
	@for v in $(ETCD_VERSIONS); do tests/etcdbin/build.sh $$v $(ETCD_CACHE)/$$v || exit 1; done

vet: deps
	$(GO) vet ./...

# test runs the whole default suite: unit, controller and integration tests
# against real etcd (embedded, and the etcd binaries of both versions).
test: etcd-binaries vet
	NICO_ETCD_BINARIES=$$(echo $(ETCD_BINARIES) | tr ' ' ':') NICO_REQUIRE_ETCD_BINARIES=1 \
		$(GO) test -count=1 -timeout 14m ./...

# test-short runs only the fast tiers (planners, stores, config).
test-short: deps
	$(GO) test -count=1 -short ./pkg/...

# bench measures join-to-voter latency against the kubeadm-style baseline
# and client availability through joins and removals.
bench: etcd-binaries
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x -timeout 30m ./tests/bench/ | tee bench.out

# demo: five agents as separate processes on loopback, grown through
# learners and shrunk by removing two nodes, the etcd leader among them.
demo: build
	$(GO) run ./tests/demo -bin $(BIN)

fmt:
	gofmt -w $$(git ls-files '*.go')

clean:
	rm -rf $(BIN) bench.out
