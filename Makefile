# Flotilla — see README.md. `make help` lists the targets.
GO        ?= go
TESTBIN   := $(CURDIR)/.testbin
DEMO_DIR  ?= $(CURDIR)/.demo
GOTESTFLAGS ?= -race -count=1 -timeout 30m
# VERSION is stamped into the binaries (--version, the hub's /version).
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo devel)
LDFLAGS   := -X github.com/flotilla-io/flotilla/internal/version.override=$(VERSION)

export FLOTILLA_TESTBIN := $(TESTBIN)
export QUIC_GO_DISABLE_RECEIVE_BUFFER_WARNING := true

# Images: `make images` writes bin/images/flotilla-{hub,agent}.tar.
IMAGE_REPO ?= ghcr.io/flotilla-io
IMAGE_TAG  ?= $(VERSION)

.PHONY: help build test unit e2e bench perf testbin demo vet fmt clean generate generate-check images diagram docs

help: ## list the targets
	@grep -E '^[a-z0-9-]+:.*## ' $(MAKEFILE_LIST) | awk -F':.*## ' '{printf "  %-14s %s\n", $$1, $$2}'

build: ## compile every package, and flotilla-hub, flotilla-agent, flotilla, kubectl-flotilla and the test tools into bin/
	$(GO) build ./...
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/ ./cmd/... ./test/cmd/...

testbin: ## build kube-apiserver, controller-manager, scheduler, etcd and KWOK into .testbin/ (cold ~10 min, warm seconds)
	test/tools/build-testbin.sh $(TESTBIN)

generate: ## regenerate api/: deep copies, CRDs (api/crds), typed clients (api/client); generators from the module proxy, built once into .cache/generators
	GO=$(GO) api/hack/generate.sh

# docs runs the TestReference tests with -update-docs: those of
# internal/docgen and of every package whose tests import it. One package
# at a time: some share a page.
docs: ## regenerate docs/reference/'s generated tables (flags, metrics, API kinds, chart values) from the binaries, the CRDs and the charts
	$(GO) test -count=1 -p 1 -run '^TestReference' ./internal/docgen \
	  $$($(GO) list -f '{{.ImportPath}} {{join .TestImports " "}}' ./... | grep -E ' github.com/flotilla-io/flotilla/internal/docgen( |$$)' | cut -d' ' -f1) \
	  -args -update-docs

generate-check: ## fail if `make generate` would change api/ (it runs on a temporary copy: api/ is left alone)
	GO=$(GO) api/hack/generate.sh --check

vet: generate-check ## go vet and gofmt check of the four modules, and generate-check
	$(GO) vet ./...
	cd test/tools && $(GO) vet ./...
	cd test/tools/promtool && $(GO) vet ./...
	cd test/tools/diagram && $(GO) vet ./...
	@out=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$out" ]; then echo "gofmt needed:"; echo "$$out"; exit 1; fi

# The end-to-end tests run after the others, not beside them: their timing
# (leases of seconds, link flaps) must not share the two cores with -race
# unit tests. They take about half an hour on 2 cores: their own timeout.
test: testbin vet ## every test, unit and end-to-end against real member clusters, with -race
	$(GO) test $(GOTESTFLAGS) $$($(GO) list ./... | grep -v '/test/e2e$$')
	$(GO) test $(GOTESTFLAGS) -timeout 60m ./test/e2e
	cd test/tools && $(GO) test $(GOTESTFLAGS) ./cmd/...
	cd test/tools/promtool && FLOTILLA_TESTBIN=$(TESTBIN) $(GO) test $(GOTESTFLAGS) ./...
	cd test/tools/diagram && $(GO) test $(GOTESTFLAGS) ./...

unit: ## unit tests only (no member clusters)
	$(GO) test $(GOTESTFLAGS) $$($(GO) list ./... | grep -v '/test/')

e2e: testbin ## end-to-end tests only (real member clusters)
	$(GO) test $(GOTESTFLAGS) -timeout 60m ./test/...

bench: ## Go benchmarks
	$(GO) test -run '^$$' -bench . -benchmem ./...

perf: testbin build ## the failover and propagation figures of docs/performance.md: writes per binding and per eviction, rates, and the API server's write capacity for each, the failover with the member clusters' defaults and tuned (about 40 min on 2 cores)
	$(GO) test -run '^$$' -bench '^BenchmarkPipeline$$' -benchtime 1x ./hub/binding/
	bin/flotilla-propagation --bin-dir bin
	bin/flotilla-propagation --bin-dir bin --failover
	bin/flotilla-propagation --bin-dir bin --failover --tuned-members

diagram: ## render each docs/*.d2 to the SVG beside it (D2's Go library, its own module in test/tools/diagram)
	cd test/tools/diagram && for f in ../../../docs/*.d2; do $(GO) run . "$$f" "$${f%.d2}.svg" || exit 1; done

images: ## OCI image tarballs of flotilla-hub and flotilla-agent in bin/images/ (static, non-root, no Docker needed)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o bin/static/ ./cmd/flotilla-hub ./cmd/flotilla-agent
	cd test/tools && $(GO) build -o $(CURDIR)/bin/images-tool ./cmd/images
	for b in flotilla-hub flotilla-agent; do \
	  bin/images-tool --binary bin/static/$$b --repository $(IMAGE_REPO)/$$b --tag $(IMAGE_TAG) \
	    --revision "$$(git rev-parse HEAD 2>/dev/null)" --out bin/images/$$b.tar || exit 1; \
	done

demo: testbin build ## hub, 3 member clusters, 3 agents and a failure to watch (Ctrl-C stops)
	bin/flotilla-demo --dir $(DEMO_DIR) --bin-dir bin

clean: ## remove build output and demo state (keeps the testbin cache)
	rm -rf bin $(DEMO_DIR)
