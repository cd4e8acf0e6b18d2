# banlieue: one Kubernetes API for virtual machines on any backend.
#
#   make run       the local environment (see README)
#   make test      everything CI runs: verify, unit, integration and e2e tests
#   make reliability-doc
#                  docs/reliability.md from the table make test wrote in bin/
#
# Tools and binaries go to the ignored bin/ folder.

SHELL := /usr/bin/env bash
GO    ?= go
BIN   := $(CURDIR)/bin
# Integration tests start real servers; keep them from piling up on 2 cores.
TEST_FLAGS ?= -count=1 -timeout=30m

.PHONY: all
all: build

.PHONY: build
build: ## Build the banlieue binary and the kubectl plugin (kubectl-banlieue, docs/kubectl-banlieue.md) into bin/.
	$(GO) build -o $(BIN)/banlieue ./cmd/banlieue
	$(GO) build -o $(BIN)/kubectl-banlieue ./cmd/kubectl-banlieue

.PHONY: tools
tools: ## Build kube-apiserver, kube-controller-manager, kubectl, etcd and clusterctl from Go modules into bin/ (first run: 10+ minutes); as root, also kubelet, kube-scheduler, CoreDNS, the pause image and an etcd image of the local node, and install libvirt and QEMU (make libvirt) and containerd (hack/install-node.sh).
	hack/build-tools.sh
	@hack/install-libvirt.sh || echo "tools: libvirt and QEMU are not installed; make run leaves the local libvirt host out"
	@hack/install-node.sh || echo "tools: containerd is not installed; make run runs banlieue's controller and providers as processes, not pods"

.PHONY: libvirt
libvirt: ## Install libvirtd, QEMU and the guest-image tools from Debian packages (as root; otherwise prints the apt command); build the installer ISO bin/guest/installer.iso.
	hack/install-libvirt.sh
	hack/build-installer-iso.sh $(BIN)/guest/installer.iso

.PHONY: generate
generate: ## Regenerate deepcopy, defaulters, conversions, OpenAPI, clientset, listers, informers, apply configurations.
	hack/update-codegen.sh

.PHONY: verify
verify: ## Fail on stale generated code, unformatted files, untidy go.mod or go vet findings.
	hack/verify-gofmt.sh
	$(GO) mod tidy -diff
	cd test/capi && $(GO) mod tidy -diff
	cd test/monitoring && $(GO) mod tidy -diff
	$(GO) vet ./...
	cd test/capi && $(GO) vet ./...
	cd test/monitoring && $(GO) vet ./...
	hack/verify-codegen.sh

VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
IMAGE ?= ghcr.io/firestoned/banlieue:$(VERSION)

.PHONY: release-binary
release-binary: ## The shipped binary (as the Dockerfile builds it): static, -tags release, without the dev harness and simulators.
	CGO_ENABLED=0 $(GO) build -tags release -trimpath -ldflags="-s -w -X main.version=$(VERSION)" -o bin/banlieue-release ./cmd/banlieue

.PHONY: release-plugin
release-plugin: ## The kubectl plugin's release archives per platform and its krew manifest filled from artifacts/krew/banlieue.yaml, in bin/release/.
	GO=$(GO) hack/release-plugin.sh $(VERSION)

.PHONY: image
image: release-binary ## The release image as a tarball (bin/banlieue-image.tar), without Docker: the binary alone on an empty base, non-root. docker load / crane push it.
	$(GO) run ./hack/image -binary bin/banlieue-release -out bin/banlieue-image.tar -tag $(IMAGE)

.PHONY: test-unit
test-unit: tools libvirt ## Unit tests: types, validation, defaulting, merge, round-trip fuzzing; backends against vcsim and a real libvirtd; controllers that need a real etcd and kube-apiserver (bin/, from make tools).
	$(GO) test $(TEST_FLAGS) ./pkg/... ./cmd/... ./hack/image/... ./test/bench/

.PHONY: test-integration
test-integration: ## The real API server in-process on a real embedded etcd.
	$(GO) test $(TEST_FLAGS) ./test/integration/...

.PHONY: test-e2e
test-e2e: build tools libvirt ## kubectl against a real kube-apiserver aggregating the banlieue binary; providers against vcsim and a real libvirtd (the vSphere crash scenarios add their rows to bin/reliability.md).
	$(GO) test $(TEST_FLAGS) ./test/e2e/...

.PHONY: test-reliability
test-reliability: build tools ## Concurrency, crashes and outages against the real processes; writes bin/reliability.md (make reliability-doc copies it to docs/).
	$(GO) test $(TEST_FLAGS) ./test/reliability/...

.PHONY: test-long
# How much each fuzz target runs in make test-long (make test runs their
# corpora only): a count of executions (about 4 to 6 minutes each here), not
# a duration. With a duration Go 1.26's fuzz coordinator can fail a clean
# campaign with "context deadline exceeded" at the deadline
# (https://go.dev/issue/75804, fixed in Go 1.27).
FUZZTIME ?= 1000000x

test-long: build tools ## The reliability scenarios at their long sizes, then a fuzzing campaign per target; writes bin/reliability-long.md (not part of make test).
	$(GO) test $(TEST_FLAGS) -timeout 60m ./test/reliability/... -args -long
	$(GO) test $(TEST_FLAGS) -timeout 30m ./test/e2e/vsphere/... -args -long
	$(GO) test -run '^$$' -fuzz '^FuzzDecodeValidate$$' -fuzztime $(FUZZTIME) ./pkg/apis/banlieue/validation
	$(GO) test -run '^$$' -fuzz '^FuzzResolve$$' -fuzztime $(FUZZTIME) ./pkg/apis/banlieue/validation

.PHONY: reliability-doc
reliability-doc: ## Copy the reliability tables passing runs left in bin/ (make test, make test-long) to docs/reliability.md and docs/reliability-long.md; the tests never write docs/.
	hack/reliability-doc.sh

.PHONY: test-capi
test-capi: build tools libvirt ## Cluster API's own reconcilers (in the test process) against our CRDs, with the shipped controller and provider Deployments as pods on a real node (root) building on real libvirtds, pvesim and vcsim (separate module, test/capi).
	cd test/capi && $(GO) test $(TEST_FLAGS) ./...

.PHONY: test-monitoring
test-monitoring: build tools libvirt ## artifacts/monitoring (rules, dashboard, ServiceMonitor) against the shipped controller and Proxmox VE provider Deployments as pods on a real node (root), scraped through the ServiceMonitor's EndpointSlices; an image import reads bin/guest (separate module, test/monitoring).
	cd test/monitoring && $(GO) test $(TEST_FLAGS) ./...

.PHONY: test
test: verify test-unit test-integration test-e2e test-reliability test-capi test-monitoring bench-smoke ## Everything: verify, unit, integration, e2e, reliability, Cluster API and monitoring tests and the benchmark at tiny size.

# Extra arguments for the benchmark, e.g. BENCH_ARGS="-n 2000 -vms 0".
BENCH_ARGS ?=

.PHONY: bench
bench: build tools ## Measure banlieue against the CRD alternative and raw etcd, image import against a raw upload, console echo against libvirtd, and snapshots against the same backend calls; writes bench/results/latest, images, console and snapshots (.md, .json).
	$(GO) run ./test/bench $(BENCH_ARGS)
	$(GO) run ./test/bench -images
	$(GO) run ./test/bench -console
	$(GO) run ./test/bench -snapshots

.PHONY: bench-images
bench-images: build tools libvirt ## Measure image import through banlieue against a raw copy of the same bytes to the same backend (libvirt, pvesim, vcsim); writes bench/results/images.{md,json}.
	$(GO) run ./test/bench -images $(BENCH_ARGS)

.PHONY: bench-console
bench-console: build tools libvirt ## Measure a console keystroke's echo through virtualmachines/NAME/console against the same console opened at libvirtd; writes bench/results/console.{md,json}.
	$(GO) run ./test/bench -console $(BENCH_ARGS)

.PHONY: bench-snapshots
bench-snapshots: build tools libvirt ## Measure snapshot create, restore and delete through the API against the same backend calls made directly (pvesim, vcsim, a real libvirtd); writes bench/results/snapshots.{md,json}.
	$(GO) run ./test/bench -snapshots $(BENCH_ARGS)

.PHONY: bench-smoke
bench-smoke: build tools ## The benchmark at tiny size, failing on any error, so it never rots (results in bin/bench-smoke).
	$(GO) run ./test/bench -strict -n 60 -c 4 -watchers 5 -watch-events 10 -vms 10 -samples 60 -settle 1s -out bin/bench-smoke
	$(GO) run ./test/bench -scale -strict -sizes 20,60 -vcenters 2 -fleet-vms 6 -c 4 -samples 60 -settle 1s -out bin/bench-smoke
	$(GO) run ./test/bench -images -image-mib 16 -out bin/bench-smoke
	$(GO) run ./test/bench -console -console-keys 20 -out bin/bench-smoke
	$(GO) run ./test/bench -snapshots -strict -snapshot-rounds 3 -out bin/bench-smoke

.PHONY: bench-scale
bench-scale: build tools ## Growth with size: 20 simulated vCenters provisioning 2000 VMs, then 1k, 10k and 50k VMs stored; writes bench/results/scale.{md,json}.
	$(GO) run ./test/bench -scale $(BENCH_ARGS)

# Extra arguments for "banlieue dev", e.g. DEV_ARGS=--dir=/tmp/banlieue.
DEV_ARGS ?=

.PHONY: run
# As root make run starts a real node, which runs the release binary's image.
RUN_NEEDS := build tools
ifeq ($(shell id -u),0)
RUN_NEEDS += release-binary
endif

run: $(RUN_NEEDS) ## A local control plane with banlieue aggregated into it (as root, with a real node running pods); data kept in .banlieue/. Ctrl-C stops it.
	@hack/build-guest-image.sh $(BIN)/guest/guest.qcow2 2>/dev/null || echo "run: no guest image (make libvirt installs its tools); the local libvirt host is left out"
	$(BIN)/banlieue dev $(DEV_ARGS)

.PHONY: clean
clean:
	rm -rf $(BIN)

.PHONY: help
help:
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-18s %s\n", $$1, $$2}'
