# Torus: the Torus operator and the kubectl-mpi plugin.
SHELL := /usr/bin/env bash -o pipefail
.SHELLFLAGS := -ec

ROOT        := $(abspath .)
BIN         := $(ROOT)/bin
TESTBIN     ?= $(ROOT)/.testbin
export TESTBIN

VERSION     ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS     := -s -w -X github.com/torus-mpi/torus/pkg/version.Version=$(VERSION)
GO          ?= go
# Every go command here builds static binaries without cgo, the way they
# ship, and in one configuration: so vet, the tests, make build and the
# helper modules share each compiled package in the build cache instead of
# compiling Kubernetes's libraries once per configuration (a cold run's
# largest cost). Release archives add -trimpath (hack/release).
export CGO_ENABLED := 0
RELEASE_VERSION := $(shell cat VERSION)
IMG            ?= ghcr.io/torus-mpi/torus-operator:v$(RELEASE_VERSION)
CONTAINER_TOOL ?= $(shell command -v podman 2>/dev/null || command -v docker 2>/dev/null)
# The suites run without go test's own vet pass: make lint has run go vet,
# every analyzer of it, over the same packages and their tests, and go
# test's subset would analyze each package again (its results are not
# shared with go vet's).
GO_TEST     := $(GO) test -vet=off
# Integration suites start their own API servers; two packages at once fill
# the two cores without starving either.
GO_TEST_P   ?= 2

# Components `make testbin` builds from pinned modules (hack/testbin/*/go.mod):
# "envtest" (etcd, kube-apiserver) or "cluster" (also kube-controller-manager,
# kube-scheduler, kubectl, kwok, JobSet, Kueue and metrics-server), or names
# of single ones.
TESTBIN_COMPONENTS ?= cluster
CLUSTER_DIR        ?= $(ROOT)/.cluster
DASHBOARD_WORKERS  ?= 4096
MAXIMA             ?= 1024,4096
# 110 pods each: room for a job of 16,384 workers.
MAXIMA_NODES       ?= 160
# Kueue's waitForPodsReady.timeout on the clusters of bench-maxima and
# bench-many: on 2 cores the pods of 16,384 workers, or of the last of a
# burst of 1,000 jobs, take longer than 5 minutes to all run.
MAXIMA_PODS_READY  ?= 60m
# A private address for the kwok nodes of cluster-up's, test-e2e's and
# bench-maxima's clusters, added to the loopback interface (root, with
# iproute2's ip): the API server's node proxy refuses loopback addresses,
# and kubectl mpi top reads usage through it. Otherwise kwok stays on
# 127.0.0.1 and top says why it cannot read usage there.
KWOK_ADDRESS       ?= $(if $(and $(filter 0,$(shell id -u)),$(shell command -v ip)),10.236.0.1)
KWOK_FLAGS         := $(if $(KWOK_ADDRESS),-kwok-address $(KWOK_ADDRESS))
# Where kwok has that address, test-e2e's and bench-maxima's clusters also
# serve the metrics API (metrics-server), from which kubectl mpi top reads
# usage as on most clusters.
METRICS_FLAGS      := $(if $(KWOK_ADDRESS),-metrics-server)
MANY               ?= 200x8
# How many objects of a kind Kueue reconciles at once, over its manifests'
# settings, such as JobSet.jobset.x-k8s.io=5 (they leave JobSets at one).
MANY_KUEUE         ?=
# Larger sizes, up to max (as many as the real nodes hold), need more than 2 cores.
HOSTS              ?= 2,4,8,16
HOST_RUNS          ?= 3
MPI_OPERATOR       ?= 1024,200x8
# More mpi-operator flags, such as --controller-queue-rate-limit=1000; MPI_OPERATOR_QUEUE=false runs both unqueued.
MPI_OPERATOR_ARGS  ?=
MPI_OPERATOR_QUEUE ?= true
CONTROLLER_GEN     := $(TESTBIN)/bin/controller-gen
# Each Ginkgo suite writes a JSON report in its package directory; when one
# fails, hack/failures prints each failed spec with the end of its message,
# so that the last lines of the run say why.
GINKGO_REPORT := -ginkgo.json-report=ginkgo-report.json
clean-reports = find $(1) -name ginkgo-report.json -delete
ginkgo-failed = { $(GO) run ./hack/failures $(1); exit 1; }

.DEFAULT_GOAL := help

##@ General

.PHONY: help
help: ## Show this help.
	@awk 'BEGIN {FS = ":.*##"; printf "Usage: make <target>\n"} /^[a-zA-Z_0-9-]+:.*?##/ { printf "  \033[36m%-18s\033[0m %s\n", $$1, $$2 } /^##@/ { printf "\n\033[1m%s\033[0m\n", substr($$0, 5) }' $(MAKEFILE_LIST)

##@ Build

.PHONY: build
build: web ## Build bin/torus-operator and bin/kubectl-mpi, static as they ship (the operator image holds only its binary; the plugin embeds the dashboard).
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/torus-operator ./operator/cmd/torus-operator
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/kubectl-mpi ./plugin/cmd/kubectl-mpi

# The dashboard's page: PatternFly and React from the npm registry, at the
# versions the committed lockfile pins, bundled by esbuild into
# plugin/dashboard/web/dist, which kubectl-mpi embeds. A tree where it is not
# built still compiles; its dashboard says how to build the page.
WEB := plugin/dashboard/web
.PHONY: web
web: $(WEB)/dist/index.html ## Build the dashboard's page into plugin/dashboard/web/dist (npm ci from the lockfile, then esbuild).
$(WEB)/dist/index.html: $(WEB)/package-lock.json $(WEB)/build.mjs $(wildcard $(WEB)/src/*)
	hack/web.sh

.PHONY: testbin
testbin: ## Build control-plane binaries from pinned modules into .testbin/bin (TESTBIN_COMPONENTS selects).
	hack/testbin/build.sh $(TESTBIN_COMPONENTS)

$(CONTROLLER_GEN):
	hack/testbin/build.sh controller-gen

##@ Generate

.PHONY: generate
generate: $(CONTROLLER_GEN) ## Generate deepcopy, Torus's CRDs, RBAC, webhook manifests and the Trainer CRDs and upstream's non-MPI runtimes into kustomize/, and the troubleshooting guide's pod states, launch and program failures.
	$(CONTROLLER_GEN) object paths="./api/..."
	$(CONTROLLER_GEN) crd paths="./api/..." output:crd:artifacts:config=kustomize/crd/torus
	$(CONTROLLER_GEN) rbac:roleName=torus-operator paths="./operator/..." output:rbac:artifacts:config=kustomize/rbac
	$(CONTROLLER_GEN) webhook paths="./operator/..." output:webhook:artifacts:config=kustomize/webhook
	$(GO) run ./hack/crdgen -out kustomize/crd/trainer -runtimes kustomize/runtimes/upstream
	$(GO) run ./hack/bundle -out bundle
	$(GO) run ./hack/docgen

.PHONY: verify-generate
verify-generate: generate ## Fail when generated files differ from what is committed.
	@git diff --exit-code -- kustomize/ api/ bundle/ docs/users/troubleshooting.md || { echo "generated files are stale: run make generate and commit"; exit 1; }

##@ Test

.PHONY: test
test: prefetch lint verify-generate testbin test-unit verify-krew verify-rules test-integration test-chaos test-wire test-cluster-suites ## Run every test: lint, generation check, unit (with the fuzz targets' seed corpora), krew manifest, Prometheus rules, integration, chaos, wire and the suites on local clusters.

# A suite's -timeout guards against a hang; it is no bound on speed. Each
# is at least twice what its tier takes on a busy machine (hack/stress.sh:
# the cluster tier about 55 minutes with its 63 specs, 1.5 times its idle
# time; e2e at most 13; chaos 7), so a slow CI machine fails only by CI's
# own limit.
CLUSTER_TIMEOUT ?= 120m
E2E_TIMEOUT ?= 40m
CHAOS_TIMEOUT ?= 30m

.PHONY: test-stress
STRESS_TARGETS ?= test-integration
STRESS_RUNS ?= 5
STRESS_COLD ?=
test-stress: ## Run STRESS_TARGETS (default test-integration; e.g. "test-e2e test-cluster", or test) STRESS_RUNS times in a row (default 5) while a CPU burner, a parallel go build and a syncing disk writer occupy the machine; stops at the first failure; STRESS_COLD=1 runs each in a fresh clone with empty caches (hack/stress.sh).
	hack/stress.sh $(if $(STRESS_COLD),-cold) -runs $(STRESS_RUNS) $(STRESS_TARGETS)

.PHONY: test-cluster-suites
test-cluster-suites: ## The suites on local clusters: make test-e2e (kwok nodes) beside make test-cluster, then make test-olm (a real node each, one at a time); each suite's output is printed when it ends.
	$(MAKE) --no-print-directory -j2 --output-sync=target CLUSTER_SUITES=1 test-e2e test-cluster test-olm

# In test-cluster-suites, the two suites with a real node take turns: a machine
# runs one kubelet. e2e's cluster has kwok nodes only, and its suite waits
# on the cluster more than it computes (about a third of two cores), so it
# runs beside them.
ifdef CLUSTER_SUITES
test-olm: | test-cluster
endif

.PHONY: prefetch
prefetch: ## Start in the background what later targets need: downloads (helper modules, the node's and the wire test's packages, the MPI images), then at the lowest priority the binaries.
	@hack/prefetch.sh $$PPID

.PHONY: test-unit
test-unit: ## Unit tests (no API server).
	$(GO_TEST) -count=1 ./api/... ./pkg/... ./operator/... ./plugin/... ./internal/... ./launch/... ./hack/... ./test/framework/ ./test/perf/... ./test/localcluster/... ./test/browser/...

.PHONY: test-integration
test-integration: testbin ## Integration tests on a real kube-apiserver and etcd (envtest); the drop-in suite also runs upstream Trainer's controller, and OpenShift's SCC admission code judges pods.
	hack/testbin/build.sh trainer openshift
	$(call clean-reports,test/integration)
	KUBEBUILDER_ASSETS=$(TESTBIN)/bin $(GO_TEST) -count=1 -p $(GO_TEST_P) -timeout 20m ./test/integration/... -ginkgo.v $(GINKGO_REPORT) \
	  || $(call ginkgo-failed,test/integration)

.PHONY: test-chaos
test-chaos: build testbin ## The operator binary killed with SIGKILL at random moments while 200 TrainJobs are created and while they finish (real kube-apiserver and etcd).
	$(call clean-reports,test/chaos)
	KUBEBUILDER_ASSETS=$(TESTBIN)/bin $(GO_TEST) -count=1 -v -timeout $(CHAOS_TIMEOUT) ./test/chaos/ -ginkgo.v $(GINKGO_REPORT) || $(call ginkgo-failed,test/chaos)

.PHONY: test-wire
test-wire: testbin ## Real Open MPI and MPICH ranks over real sshd between network namespaces, from the operator's own objects (root; installs Debian packages; skips without root, fails instead under TORUS_REQUIRE_ROOT_TIERS=1 as in CI).
	$(call clean-reports,test/wire)
	KUBEBUILDER_ASSETS=$(TESTBIN)/bin $(GO_TEST) -count=1 -timeout 15m ./test/wire/ -ginkgo.v $(GINKGO_REPORT) || $(call ginkgo-failed,test/wire)

.PHONY: node-deps
node-deps: ## What the real nodes run: Debian's runc, CNI plugins, iptables and ipset (root), and the kubelet, containerd, CoreDNS, kube-router, Multus and Whereabouts from pinned modules.
	hack/node/install.sh
	hack/testbin/build.sh node

.PHONY: test-cluster
test-cluster: build testbin node-deps ## The local cluster's start-up: up under port pressure, dead components named; real MPI jobs across two real nodes, Multus, enforced NetworkPolicies, OpenShift's SCC admission (-openshift); nothing left by down.
	hack/testbin/build.sh openshift
	$(call clean-reports,test/cluster)
	$(GO_TEST) -count=1 -timeout $(CLUSTER_TIMEOUT) ./test/cluster/ -ginkgo.v $(GINKGO_REPORT) || $(call ginkgo-failed,test/cluster)

.PHONY: test-e2e
test-e2e: build testbin ## End-to-end tests on a fresh local cluster (stopped afterwards, logs kept in .cluster/logs).
	$(call clean-reports,test/e2e)
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator $(KWOK_FLAGS) $(METRICS_FLAGS)
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig $(GO_TEST) -count=1 -timeout $(E2E_TIMEOUT) ./test/e2e/... -ginkgo.v -ginkgo.label-filter '!bench' $(GINKGO_REPORT) && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); \
	  if [ $$status != 0 ]; then $(call ginkgo-failed,test/e2e); fi

.PHONY: lint
lint: ## go vet, staticcheck (pinned in hack/testbin/staticcheck) on what ships, gofmt, the repository's text stating the product rather than the history of its making (hack/historycheck), the code map naming every package (hack/codemapcheck), and the dashboard's TypeScript type-checked strictly (tsc).
	$(GO) vet ./... ./hack/... ./test/...
	hack/testbin/build.sh staticcheck
	$(TESTBIN)/bin/staticcheck ./...
	$(GO) run ./hack/historycheck
	$(GO) run ./hack/codemapcheck
	hack/web.sh check
	@out=$$(gofmt -l $$(git ls-files '*.go' | grep -v '^hack/testbin/\|^hack/tools/')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

.PHONY: bench
bench: ## Torus against upstream Trainer v2.3.0 and the floor side by side, N = 100, 500, 1,000 and 10,000, three runs each (about 70 minutes; BENCH_FLAGS=-quick for N=100 once, or e.g. BENCH_FLAGS="-n 1000 -runs 1"); writes test/perf/results.md.
	$(GO) run ./test/perf/controlplane $(BENCH_FLAGS)

.PHONY: bench-dashboard
bench-dashboard: web ## How soon the dashboard shows a new job and a state change in headless Chromium, with 10 and 1,000 jobs in the namespace (about a minute); writes test/perf/dashboard.md.
	$(GO) run ./test/perf/controlplane -dashboard $(BENCH_FLAGS)

.PHONY: bench-tenants
bench-tenants: ## What one tenant's objects cost the operator: a flood of ConfigMaps and Secrets carrying Torus's label, each cached kind at its worst, and one job's 1,000 to 16,384 pods, and how soon describe and the dashboard answer about the largest (about 5 minutes); writes test/perf/tenants.md.
	$(GO) run ./test/perf/controlplane -tenants $(BENCH_FLAGS)

.PHONY: bench-micro
bench-micro: ## Micro-benchmarks: key generation, rendering, a reconcile's reading of a big job's pods, the dashboard's reading of an open job's pods, migrate throughput.
	$(GO) test -run '^$$' -bench . -benchmem ./pkg/mpi/... ./pkg/diagnosis/... ./pkg/trainjob/... ./operator/children/... ./plugin/dashboard/... ./plugin/migrate/...

# Budgets are execution counts, not durations: Go 1.26's coordinator can fail a
# duration-bounded run with "context deadline exceeded" as the clock runs out
# (go.dev/issue/75804, fixed in 1.27), and minimizing each new input for the
# default 60 s would spend a short duration budget on the first input alone.
FUZZ_EXECS ?= 15000x
FUZZ_MINIMIZE ?= 200x

.PHONY: fuzz
fuzz: ## Short fuzz runs: the migrate parser; admission, job resolution and BuildJobSet. Not in make test: -fuzz compiles the whole graph again, instrumented (6.7 minutes of a cold run); make test-unit runs their seed corpora.
	$(GO) test ./plugin/migrate/ -run '^$$' -fuzz '^FuzzParse$$' -fuzztime=$(FUZZ_EXECS) -fuzzminimizetime=$(FUZZ_MINIMIZE)
	$(GO) test ./operator/webhook/ -run '^$$' -fuzz '^FuzzAdmitResolveBuild$$' -fuzztime=$(FUZZ_EXECS) -fuzzminimizetime=$(FUZZ_MINIMIZE)

.PHONY: bench-logs
bench-logs: build testbin ## kubectl mpi logs vs kubectl logs -l --prefix on a 256-rank job (257 pods), on a fresh local cluster.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig $(GO_TEST) -count=1 -timeout 20m ./test/e2e/ -v -ginkgo.focus 'benchmarks against kubectl' && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-dashboard-job
bench-dashboard-job: build testbin ## What one open dashboard page of a 4,096-worker job costs the API server (requests, pod lists, bytes, log streams) on a fresh local cluster of 40 kwok nodes (about 15 minutes; DASHBOARD_WORKERS=N for another size); writes test/perf/dashboard-job.md.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes 40
	KUBECONFIG=$(CLUSTER_DIR)/kubeconfig TORUS_BENCH_DASHBOARD_WORKERS=$(DASHBOARD_WORKERS) TORUS_BENCH_OUT=$(ROOT)/test/perf/dashboard-job.md \
	  $(GO_TEST) -count=1 -timeout 40m ./test/e2e/ -v -ginkgo.focus 'one open page of a big job' && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-e2e
bench-e2e: build testbin ## Seconds from TrainJob creation to admission and to all pods Running on a fresh local cluster's kwok nodes, for jobs of 1 to 256 workers and 50 jobs at once, and the controller's reconciles, API requests and CPU for each job: Torus through Kueue, Torus unqueued, then upstream Trainer's controller and MPI runtime unqueued on a fresh cluster.
	hack/testbin/build.sh trainer
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig && $(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -queue=false && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); test $$status = 0
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -upstream-trainer
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -upstream && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-e2e-real
bench-e2e-real: build testbin node-deps ## Seconds from TrainJob creation to all pods Running, to every rank past MPI_Init and to Complete for real 2-worker jobs on the real nodes (root), p50/p95 of 10, launched through the image's OpenSSH and through Torus's launch agent, each beside a job of the floor (the same pods as a plain JobSet) and of the floor with one init container per pod, with each step of the start timed; the launcher's start to every rank past MPI_Init across 16 hosts (Open MPI, MPICH); the reference training at 1, 2 and 4 ranks; a worker's pod deleted, to every rank of the restarted run past MPI_Init, against the cold start; then the 2-worker jobs with upstream Trainer's controller and MPI runtime on a fresh cluster.
	hack/testbin/build.sh trainer
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -real-node
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -real-node && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); test $$status = 0
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -real-node -upstream-trainer
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -real-node -upstream && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-maxima
bench-maxima: build testbin ## The tested maxima: one MPI job of each size in MAXIMA workers (1,024 and 4,096; up to 16,384) through Kueue on a fresh local cluster of MAXIMA_NODES kwok nodes, each against the floor of its JobSet created directly (MAXIMA_FLAGS=-floor=false: without), with the operator's peak memory, CPU and API requests and how long list, describe, logs and the dashboard take to answer at that size (about 20 minutes); writes test/perf/maxima.md.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes $(MAXIMA_NODES) -pods-ready-timeout $(MAXIMA_PODS_READY) $(KWOK_FLAGS) $(METRICS_FLAGS)
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -maxima $(MAXIMA) -plugin $(BIN)/kubectl-mpi $(MAXIMA_FLAGS) > $(ROOT)/test/perf/maxima.md.new && status=0 || status=$$?; \
	  cat $(ROOT)/test/perf/maxima.md.new; test $$status = 0 && mv $(ROOT)/test/perf/maxima.md.new $(ROOT)/test/perf/maxima.md; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-maxima-apart
bench-maxima-apart: build testbin ## One size of bench-maxima (MAXIMA, such as 16384) with Torus's job and its floor each on a fresh local cluster of its own, for sizes whose pods take longer to go than to start on a small machine (on 2 cores, 16,384); writes test/perf/maxima-apart.md.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes $(MAXIMA_NODES) -pods-ready-timeout $(MAXIMA_PODS_READY) $(KWOK_FLAGS) $(METRICS_FLAGS)
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -maxima $(MAXIMA) -plugin $(BIN)/kubectl-mpi -floor=false -save-floor $(ROOT)/test/perf/maxima-apart.floor.new > $(ROOT)/test/perf/maxima-apart.md.new && status=0 || status=$$?; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); test $$status = 0 || { cat $(ROOT)/test/perf/maxima-apart.md.new; exit $$status; }
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes $(MAXIMA_NODES) -pods-ready-timeout $(MAXIMA_PODS_READY) $(KWOK_FLAGS) $(METRICS_FLAGS)
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -floor-of $(ROOT)/test/perf/maxima-apart.floor.new >> $(ROOT)/test/perf/maxima-apart.md.new && status=0 || status=$$?; \
	  cat $(ROOT)/test/perf/maxima-apart.md.new; test $$status = 0 && mv $(ROOT)/test/perf/maxima-apart.md.new $(ROOT)/test/perf/maxima-apart.md; \
	  rm -f $(ROOT)/test/perf/maxima-apart.floor.new; $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-many
bench-many: build testbin ## Many jobs at once: MANY (200x8; 1000x8 with MANY_KUEUE=JobSet.jobset.x-k8s.io=5) TrainJobs created in a burst through Kueue on a fresh local cluster of MAXIMA_NODES kwok nodes, against the floor of their JobSets created directly, with each job's creation → JobSet, admission, all pods Running and status lag, and the operator's peak memory, CPU and API requests (about 10 minutes at 200x8); writes test/perf/many.md.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes $(MAXIMA_NODES) -pods-ready-timeout $(MAXIMA_PODS_READY) $(if $(MANY_KUEUE),-kueue-concurrency $(MANY_KUEUE))
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -many $(MANY) $(MANY_FLAGS) > $(ROOT)/test/perf/many.md.new && status=0 || status=$$?; \
	  cat $(ROOT)/test/perf/many.md.new; test $$status = 0 && mv $(ROOT)/test/perf/many.md.new $(ROOT)/test/perf/many.md; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-mpi-operator
bench-mpi-operator: build testbin ## Side by side with Kubeflow's mpi-operator v0.8.2 (built from its Go module): each case in MPI_OPERATOR (one job of 1,024 workers, 200 jobs of 8) as Torus's TrainJobs and as MPIJobs, both through Kueue (MPI_OPERATOR_QUEUE=false: neither), on a fresh local cluster of MAXIMA_NODES kwok nodes, with each controller's time to every pod Running, CPU, memory and API requests (about 20 minutes); writes test/perf/mpi-operator.md.
	hack/testbin/build.sh mpi-operator
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -nodes $(MAXIMA_NODES) -pods-ready-timeout $(MAXIMA_PODS_READY) -kueue-mpijob
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -mpi-operator $(MPI_OPERATOR) -queue=$(MPI_OPERATOR_QUEUE) -mpi-operator-bin $(TESTBIN)/bin/mpi-operator -mpi-operator-args "$(MPI_OPERATOR_ARGS)" > $(ROOT)/test/perf/mpi-operator.md.new && status=0 || status=$$?; \
	  cat $(ROOT)/test/perf/mpi-operator.md.new; test $$status = 0 && mv $(ROOT)/test/perf/mpi-operator.md.new $(ROOT)/test/perf/mpi-operator.md; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

.PHONY: bench-hosts
bench-hosts: build testbin node-deps ## Real MPI jobs of more and more hosts on the real nodes (root): Open MPI jobs of HOSTS workers of one rank each (2 to 16; "max" for as many as the two nodes hold), HOST_RUNS of each through the image's OpenSSH and through Torus's launch agent, timed from creation to all pods Running and from the launcher's start to every rank past MPI_Init (about 15 minutes); writes test/perf/hosts.md.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR) >/dev/null
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator -real-node
	$(GO) run ./test/perf/cluster -kubeconfig $(CLUSTER_DIR)/kubeconfig -real-node -sections hosts -hosts $(HOSTS) -host-runs $(HOST_RUNS) > $(ROOT)/test/perf/hosts.md.new && status=0 || status=$$?; \
	  cat $(ROOT)/test/perf/hosts.md.new; test $$status = 0 && mv $(ROOT)/test/perf/hosts.md.new $(ROOT)/test/perf/hosts.md; \
	  $(GO) run ./test/localcluster down -dir $(CLUSTER_DIR); exit $$status

##@ Packaging

.PHONY: manifests
manifests: ## Render the kustomize overlays into dist/manifests (kubernetes.yaml, openshift.yaml).
	$(GO) run ./hack/manifests -out dist/manifests

.PHONY: bundle
bundle: ## Regenerate the OLM bundle in bundle/ (IMG=...@sha256:... for a disconnected-ready release).
	$(GO) run ./hack/bundle -out bundle -image $(IMG)

.PHONY: release
release: web ## Cross-compile kubectl-mpi (with the dashboard), pack the krew archives, fill dist/release/mpi.yaml, and check it.
	$(GO) run ./hack/release -out dist/release
	cd hack/krewcheck && GOWORK=off KREW_RELEASE_DIR=$(ROOT)/dist/release $(GO) test -count=1 ./...

.PHONY: image
image: ## Build the operator image with podman or docker (needs a container engine).
	@test -n "$(CONTAINER_TOOL)" || { echo "make image needs podman or docker"; exit 1; }
	$(CONTAINER_TOOL) build -f Containerfile --build-arg VERSION=v$(RELEASE_VERSION) -t $(IMG) .

MPI_IMAGE ?= torus-mpi:bookworm
MPI_SUITE ?= bookworm
.PHONY: image-mpi
image-mpi: ## The reference MPI image (Debian bookworm: Open MPI 4, OpenSSH, Python as python and python3, mpi4py, NumPy, the quick start's training) as a docker archive in dist/images, named MPI_IMAGE (root, Debian: mmdebstrap; no container engine). MPI_SUITE=bookworm-nossh: without OpenSSH, its home writable by OpenShift's assigned UIDs, for the Kubeflow SDK's CustomTrainer.
	$(GO) run ./test/localcluster image -suite $(MPI_SUITE) -tag $(MPI_IMAGE) -o dist/images/torus-mpi-$(MPI_SUITE).tar

# The image of the shipped torus-python runtime, released with the operator at
# its version (samples/runtimes/torus-python.yaml names it; its test holds the
# two to VERSION).
PYTHON_IMAGE ?= ghcr.io/torus-mpi/mpi-python:v$(RELEASE_VERSION)
.PHONY: image-mpi-python
image-mpi-python: ## The torus-python runtime's image: the reference MPI image without OpenSSH, named PYTHON_IMAGE, as dist/images/torus-mpi-bookworm-nossh.tar (root, Debian: mmdebstrap).
	$(MAKE) image-mpi MPI_SUITE=bookworm-nossh MPI_IMAGE=$(PYTHON_IMAGE)

.PHONY: verify-rules
verify-rules: ## The shipped PrometheusRule, loaded with Prometheus's own rule parser; its alerts read only metrics the operator exports.
	cd hack/rulecheck && GOWORK=off $(GO) test -count=1 ./...

.PHONY: verify-krew
verify-krew: ## The krew manifest, checked with krew's own types, on a placeholder release.
	cd hack/krewcheck && GOWORK=off $(GO) test -count=1 ./...

.PHONY: test-olm
test-olm: build ## OLM install and least-privilege end to end, on a fresh cluster in /tmp/torus-olm-cluster.
	hack/testbin/build.sh cluster olm openshift
	$(call clean-reports,test/olm)
	$(GO_TEST) -count=1 -v -timeout 30m ./test/olm/ -ginkgo.v $(GINKGO_REPORT) || $(call ginkgo-failed,test/olm)

##@ Local cluster

.PHONY: cluster-up
cluster-up: build testbin ## Start the local cluster (kubeconfig: .cluster/kubeconfig), with a real node where one can run (root; CLUSTER_NODE=kwok for kwok nodes only).
	@if [ "$$(id -u)" = 0 ] && [ "$${CLUSTER_NODE:-auto}" != kwok ]; then \
	  $(MAKE) --no-print-directory node-deps || echo "make cluster-up: the real node's dependencies did not install"; \
	fi
	@flags=""; \
	if [ "$${CLUSTER_NODE:-auto}" != kwok ]; then \
	  if why=$$($(GO) run ./test/localcluster node-check -testbin $(TESTBIN)/bin 2>&1); then flags=-real-node; \
	  else echo "make cluster-up: no real node here ($$why); kwok nodes only"; fi; \
	fi; \
	$(GO) run ./test/localcluster up -dir $(CLUSTER_DIR) -testbin $(TESTBIN)/bin -operator $(BIN)/torus-operator $(KWOK_FLAGS) $$flags

.PHONY: cluster-down
cluster-down: ## Stop the local cluster; its logs stay in .cluster/logs.
	$(GO) run ./test/localcluster down -dir $(CLUSTER_DIR)

.PHONY: cluster-status
cluster-status: ## Show which local cluster components run.
	$(GO) run ./test/localcluster status -dir $(CLUSTER_DIR)

##@ Run

.PHONY: demo
demo: build testbin ## Run the main job on a local default (see README): on a real node where one can run (root), else on kwok nodes.
	@if [ "$$(id -u)" = 0 ] && [ "$${DEMO_NODE:-auto}" != kwok ]; then \
	  $(MAKE) --no-print-directory node-deps || echo "make demo: the real node's dependencies did not install; the demo says why it runs without one"; \
	fi
	hack/demo.sh
