# leafsync — build, test, demo. `make help` lists the targets.
SHELL := /usr/bin/env bash
GO ?= go
BIN := $(CURDIR)/bin
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo v0.0.0-dev)
COMMIT ?= $(shell git rev-parse --short HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(VERSION) -X main.commit=$(COMMIT)
# The e2e suite starts real control planes. Its tests mostly wait on the
# engine's windows, so test/e2e/shards.sh runs them as E2E_SHARDS
# concurrent processes (2 on the 2-core machine; E2E_SHARDS=1 runs them
# one at a time).
E2E_TIMEOUT ?= 60m
E2E_RUN ?= .
E2E_SHARDS ?= 2

.PHONY: help build image tools prometheus node-packages test unit e2e e2e-compare bench vk-baseline kosmos bench-flap bench-flap-smoke bench-scale bench-scale-smoke lint staticcheck demo clean

help: ## list targets
	@grep -E '^[a-z-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-8s %s\n", $$1, $$2}'

build: ## build bin/leafsync (and bin/kubectl-leafsync, the kubectl plugin name)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/leafsync ./cmd/leafsync
	ln -sf leafsync $(BIN)/kubectl-leafsync

# The image: the static binary on an empty base, written without a Docker
# engine by build/image (its own Go module, go-containerregistry).
GOARCH ?= $(shell $(GO) env GOARCH)
image: ## leafsync's OCI image without Docker or a base image: bin/leafsync-image.tar (GOARCH=arm64 for arm)
	CGO_ENABLED=0 GOOS=linux GOARCH=$(GOARCH) $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BIN)/leafsync-linux-$(GOARCH) ./cmd/leafsync
	cd build/image && $(GO) run . -binary $(BIN)/leafsync-linux-$(GOARCH) -out $(BIN)/leafsync-image.tar \
	  -arch $(GOARCH) -version $(VERSION) -commit $(COMMIT) -ref ghcr.io/leafsync/leafsync:$(VERSION)

tools: ## build the control-plane binaries tests run (from source, cached in bin/)
	test/tools/build.sh

# The conformance smoke comes after the e2e suite: both use the machine's
# one real test node (the harness also waits on a machine-wide lock).
test: lint unit e2e conformance-smoke bench-flap-smoke bench-scale-smoke ## everything CI runs: lint, unit tests, e2e against real control planes, a smoke of the conformance run (5 specs), smokes of the flap and scale benchmarks

unit: ## unit tests (fast, no control plane)
	$(GO) test -count=1 ./...
	cd test/flapbench && $(GO) test -count=1 ./...
	cd test/flapbench/vkbaseline && $(GO) test -count=1 ./...
	cd test/scalebench && $(GO) test -count=1 ./...
	cd build/image && $(GO) test -count=1 ./...

prometheus: ## Prometheus and promtool (Debian's package), for the metrics and alert tests
	@command -v prometheus >/dev/null && command -v promtool >/dev/null || \
	  { echo "installing Debian's prometheus package"; apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends prometheus >/dev/null; }

node-packages: ## containerd, runc, the CNI plugins and iptables (Debian's packages), for the test node of the helm install e2e
	@command -v containerd >/dev/null && command -v runc >/dev/null && test -x /usr/lib/cni/bridge && command -v iptables >/dev/null && command -v ip >/dev/null || \
	  { echo "installing Debian's containerd, runc, containernetworking-plugins, iptables and iproute2"; apt-get update -qq && \
	    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends containerd runc containernetworking-plugins iptables iproute2 >/dev/null; }

e2e: tools build image prometheus node-packages conformance-build ## e2e suites against real kube-apiserver, KCM, etcd, kwok, Prometheus, and a real kubelet node (E2E_SHARDS processes at once, default 2; the real-node tests run the conformance images)
	LEAFSYNC_BINARY=$(BIN)/leafsync E2E_TIMEOUT=$(E2E_TIMEOUT) E2E_SHARDS=$(E2E_SHARDS) test/e2e/shards.sh '$(E2E_RUN)'

e2e-compare: tools build prometheus ## the eviction-guard e2e cases also without the guard, to show the harm it prevents (adds about 4 min to the guard tests)
	LEAFSYNC_E2E_COMPARE=1 LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -p 1 -timeout $(E2E_TIMEOUT) -run 'TestEvictionGuard|TestPodSyncFailover$$' -v ./test/e2e/

bench: tools build prometheus ## e2e benchmarks at full length (60s per phase; make test runs a 10s smoke); prints the BENCH lines
	set -o pipefail; LEAFSYNC_BENCH_SECONDS=$${LEAFSYNC_BENCH_SECONDS:-60} LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -p 1 -timeout 30m -run 'TestBench' -v ./test/e2e/ | grep -E 'BENCH|^(--- |ok|FAIL)'

# The flap benchmark and its virtual-kubelet baseline are Go modules of
# their own (test/flapbench, test/flapbench/vkbaseline): their dependencies
# stay out of leafsync's.
vk-baseline: ## build bin/vk-baseline, the virtual-kubelet baseline of the flap benchmark
	cd test/flapbench/vkbaseline && $(GO) build -o $(BIN)/vk-baseline .

# The Kosmos contestants run Kosmos's clustertree cluster-manager, built
# from a Kosmos checkout (KOSMOS_SRC, tag v0.5.5; docs/benchmarks/flap.md);
# without it they are left out. CONTESTANTS selects (leafsync,
# virtual-kubelet, kosmos, kosmos-deny; default all).
KOSMOS_SRC ?=
CONTESTANTS ?=
kosmos: ## build bin/kosmos-clustertree from KOSMOS_SRC, a Kosmos checkout (the flap benchmark's Kosmos contestants)
	test/flapbench/kosmos-build.sh "$(KOSMOS_SRC)" $(BIN)

# Each scenario runs FLAPBENCH_REPEAT times (fresh clusters each); the report gives
# medians and ranges.
FLAPBENCH_SCENARIOS ?=
FLAPBENCH_REPEAT ?= 3
bench-flap: tools build vk-baseline kosmos ## side-by-side flap benchmark, leafsync vs virtual-kubelet and Kosmos (KOSMOS_SRC=, CONTESTANTS=, FLAPBENCH_REPEAT=3); report in _output/flapbench
	cd test/flapbench && FLAPBENCH_SCENARIOS=$(FLAPBENCH_SCENARIOS) FLAPBENCH_REPEAT=$(FLAPBENCH_REPEAT) FLAPBENCH_CONTESTANTS=$(CONTESTANTS) KOSMOS_SRC=$(KOSMOS_SRC) LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -timeout 300m -run TestFlapBench -v .

bench-flap-smoke: tools build vk-baseline ## one short scenario of the flap benchmark, and the deny policy of its Kosmos contestant (CI)
	cd test/flapbench && FLAPBENCH_SCENARIOS=smoke FLAPBENCH_CONTESTANTS=leafsync,virtual-kubelet FLAPBENCH_OUT=$(CURDIR)/_output/flapbench-smoke LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -timeout 15m -run 'TestFlapBench|TestDenyPolicy' .

# The scale benchmark (its own module, test/scalebench): registrations of
# a few member API servers, step by step; SCALEBENCH_STEPS=50,100,200.
SCALEBENCH_STEPS ?=
bench-scale: tools build ## what one replica costs per member: RSS, CPU, registration and leaf update latency, host requests (about 11 min with the default steps; REPLICAS=3: three sharded replicas, each measured); report in _output/scalebench
	cd test/scalebench && SCALEBENCH_STEPS=$(SCALEBENCH_STEPS) REPLICAS=$(REPLICAS) LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -timeout 120m -run TestScaleBench -v .

bench-scale-smoke: tools build ## the scale benchmark with 2 and 4 small registrations (CI)
	cd test/scalebench && SCALEBENCH=smoke SCALEBENCH_OUT=$(CURDIR)/_output/scalebench-smoke LEAFSYNC_BINARY=$(BIN)/leafsync $(GO) test -tags e2e -count=1 -timeout 15m -run TestScaleBench .

# Go modules besides the root one, linted and unit-tested like it.
NESTED_MODULES := test/flapbench test/flapbench/vkbaseline test/scalebench build/image

staticcheck: ## build bin/staticcheck (pinned in test/tools/staticcheck/go.mod)
	cd test/tools/staticcheck && $(GO) build -o $(BIN)/staticcheck honnef.co/go/tools/cmd/staticcheck

lint: staticcheck ## gofmt, go vet and staticcheck (also over the e2e build tag and the nested modules)
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go' -not -path './bin/*')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags e2e ./test/...
	$(BIN)/staticcheck ./...
	$(BIN)/staticcheck -tags e2e ./test/...
	set -e; for m in $(NESTED_MODULES); do (cd $$m && $(GO) vet -tags e2e ./... && $(BIN)/staticcheck -tags e2e ./...); done

# The demo is built, then exec'd: Ctrl-C then reaches it alone through make,
# which sees its clean exit (with `go run`, make reported Error 1).
demo: tools build vk-baseline ## a host, three members, a 30s flap on leafsync and on virtual-kubelet, a 90s outage, narrated; Ctrl-C tears down
	$(GO) build -o $(BIN)/demo ./test/demo && exec $(BIN)/demo

# The upstream Kubernetes [Conformance] specs a node answers for, run
# through a leaf (#29, docs/conformance/README.md). test/conformance/build.sh
# builds e2e.test at the pinned release (its own module,
# test/conformance/suite) and the test images; the run (build tag
# conformance, as root: a real kubelet node) is serial. The full run is its
# own target, not part of make test.
CONFORMANCE_FOCUS ?=
CONFORMANCE_REPORT ?= $(CURDIR)/docs/conformance/report
.PHONY: conformance conformance-smoke conformance-build conformance-packages

conformance-packages: ## Debian's busybox-static and bash-static, the userland of the conformance run's test images
	@test -x /bin/busybox && test -x /bin/bash-static || { echo "installing Debian's busybox-static and bash-static"; apt-get update -qq && \
	  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends busybox-static bash-static >/dev/null; }

conformance-build: tools conformance-packages ## bin/e2e.test (Kubernetes' suite, pinned) and the test images in bin/conformance-images
	test/conformance/build.sh

conformance: build node-packages conformance-build ## the in-scope upstream [Conformance] specs through a leaf, serially (1-2 h); report in docs/conformance/report (CONFORMANCE_FOCUS narrows)
	LEAFSYNC_BINARY=$(BIN)/leafsync CONFORMANCE_FOCUS='$(CONFORMANCE_FOCUS)' CONFORMANCE_REPORT=$(CONFORMANCE_REPORT) \
	  $(GO) test -tags conformance -count=1 -timeout 6h -run '^TestConformance$$' -v ./test/conformance/

conformance-smoke: build node-packages conformance-build ## five conformance specs through a leaf (an exec, a volume update); report in _output/conformance-smoke
	LEAFSYNC_BINARY=$(BIN)/leafsync CONFORMANCE_SMOKE=1 CONFORMANCE_REPORT=$(CURDIR)/_output/conformance-smoke \
	  $(GO) test -tags conformance -count=1 -timeout 30m -run '^TestConformance$$' -v ./test/conformance/

clean: ## remove build output (keeps bin/ tools)
	rm -rf $(BIN)/leafsync _output
