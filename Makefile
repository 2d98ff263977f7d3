# orqest-sandbox — build, test, demo, bench.
#
#   make demo   build everything and run the demo on the embedded default policy
#   make test   every test (unit, conformance, end-to-end through the CLI),
#               again under the race detector, each fuzz target briefly,
#               vet and staticcheck
#   make bench  Go benchmarks plus the whole-system load table
#
# Python: the tiers and the Python client's tests run Debian's /usr/bin/python3
# (never a pyenv shim).

GO       ?= go
BIN      := $(CURDIR)/bin
VERSION  ?= 0.1.0
LDFLAGS  := -X main.version=$(VERSION)
MODULE   := github.com/orqest/sandbox
PLUGINS  := subprocess inprocess docker gvisor kubernetes
IMAGE      ?= orqest/agent-runtime:$(VERSION)
BASE_IMAGE ?= orqest/python-base:bookworm
EXAMPLE  := examples/thirdparty-plugin
GOFLAGS_TEST ?= -count=1 -timeout 20m
CC       ?= gcc
# The fork-server's C loop (runner/forkcore), loaded by the tier-1
# zygote; built against Debian's python3 headers, its sha256 is compiled into
# the subprocess plugin, which refuses any other bytes.
FORKCORE := $(BIN)/orqest-forkcore.so

.PHONY: python-client test-python k8s-up k8s-down test-k8s bench-k8s release image-datascience setup setup-image all build forkcore example demo test test-go test-example vet bench bench-go bench-system proto fuzz fuzz-short clean runtime image lint test-race test-summary-reset

all: build

# Install the Debian packages this machine lacks (scripts/setup.sh says which).
setup:
	@bash scripts/setup.sh
setup-image:
	@SETUP_IMAGE=1 bash scripts/setup.sh

build: setup forkcore
	@mkdir -p $(BIN)
	$(GO) build -ldflags "$(LDFLAGS)" -o $(BIN)/orqest-sandbox ./cmd/orqest-sandbox
	@for p in $(PLUGINS); do \
		extra=""; \
		case $$p in subprocess|gvisor) extra="-X $(MODULE)/plugins/$$p.forkCoreSHA256=$$(sha256sum $(FORKCORE) | cut -d' ' -f1)";; esac; \
		if [ $$p = docker ]; then extra="-X $(MODULE)/plugins/docker.version=$(VERSION)"; fi; \
		if [ $$p = kubernetes ]; then extra="-X $(MODULE)/plugins/kubernetes.version=$(VERSION)"; fi; \
		echo "$(GO) build -o $(BIN)/orqest-sandbox-plugin-$$p ./cmd/orqest-sandbox-plugin-$$p"; \
		$(GO) build -ldflags "$(LDFLAGS) $$extra" -o $(BIN)/orqest-sandbox-plugin-$$p ./cmd/orqest-sandbox-plugin-$$p || exit 1; \
	done

forkcore:
	@mkdir -p $(BIN)
	$(CC) -O2 -Wall -Wextra -Werror -shared -fPIC $$(pkg-config --cflags python3-embed) -o $(FORKCORE) runner/forkcore/forkcore.c

# The third-party example is a separate module with its own build command; it is
# not part of `make build` on purpose (a host binary that was not rebuilt finds it).
example:
	@if [ -d $(EXAMPLE) ]; then cd $(EXAMPLE) && $(MAKE) --no-print-directory build BIN=$(BIN); fi

# The agent runtime (package agent) that tier-2 containers, gVisor sessions
# and kubernetes pods run: static (no cgo) so it runs on any base image.
runtime:
	@mkdir -p $(BIN)
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w -X $(MODULE)/agent.version=$(VERSION)" -o $(BIN)/orqest-agent-runtime ./cmd/orqest-agent-runtime

# Tier-2 image. The default base is assembled locally from Debian packages (no
# registry needed). Elsewhere: make image BASE_IMAGE=python:3.11-slim
image: setup-image runtime forkcore
	@if [ "$(BASE_IMAGE)" = "orqest/python-base:bookworm" ]; then ORQEST_BASE_IMAGE=$(BASE_IMAGE) bash scripts/build-base-image.sh; fi
	docker build -q --build-arg BASE_IMAGE=$(BASE_IMAGE) --build-arg ORQEST_VERSION=$(VERSION) -t $(IMAGE) .

# The data-science variant of the tier-2 image: the same runtime on a base
# with Debian's numpy, pandas and matplotlib (Agg backend), assembled the same
# way. A sandbox picks it with config { image = "$(IMAGE_DS)" }.
IMAGE_DS      ?= $(IMAGE)-datascience
BASE_IMAGE_DS ?= orqest/python-base:bookworm-datascience
DS_PACKAGES   ?= python3-numpy,python3-pandas,python3-matplotlib
image-datascience: setup-image runtime forkcore
	ORQEST_BASE_IMAGE=$(BASE_IMAGE_DS) ORQEST_BASE_EXTRA=$(DS_PACKAGES) bash scripts/build-base-image.sh
	docker build -q --build-arg BASE_IMAGE=$(BASE_IMAGE_DS) --build-arg ORQEST_VERSION=$(VERSION) -t $(IMAGE_DS) .

demo: build
	@bash scripts/demo.sh

vet:
	$(GO) vet ./...

# staticcheck at a pinned version (built from the module proxy the first time,
# then from the build cache); staticcheck.conf says which checks are off and why.
STATICCHECK_VERSION ?= v0.8.2
STATICCHECK := $(GO) run honnef.co/go/tools/cmd/staticcheck@$(STATICCHECK_VERSION)
lint:
	$(STATICCHECK) ./...
	@if [ -d $(EXAMPLE) ]; then cd $(EXAMPLE) && GOFLAGS=-mod=mod $(STATICCHECK) ./...; fi

# lint runs last: a finding fails `make test` without hiding what the tests say.
# Its last line counts the tests of every go test run it made (test-go,
# test-race, test-example), "N passed, N failed, N skipped", after the
# skipped ones grouped by the reason they gave.
test: test-summary-reset build image image-datascience vet test-go test-race test-example test-python fuzz-short lint
	@$(TESTSUM) -report $(TEST_RECORD)

# testsum (internal/testsum) runs go test with -json, prints what plain go
# test prints, then the skips by reason and the counts, and exits with go
# test's code; each run's counts go to TEST_RECORD for `make test`'s total.
# (-json runs test binaries as -v does: testing.Verbose() is true.)
TESTSUM     := $(BIN)/orqest-testsum
TEST_RECORD := $(BIN)/test-summary.jsonl
$(TESTSUM): internal/testsum/main.go
	@mkdir -p $(BIN)
	$(GO) build -o $@ ./internal/testsum
test-summary-reset:
	@rm -f $(TEST_RECORD)

# ORQEST_FORKCORE: the tier-1 tests run the zygote with the C loop (and, where
# a test says so, without it).
test-go: $(TESTSUM)
	ORQEST_FORKCORE=$(FORKCORE) $(TESTSUM) -record $(TEST_RECORD) -label test-go -- $(GO) test -json $(GOFLAGS_TEST) ./...

# The race detector over the host side: the host, the CLI and MCP server, the
# shared wire code and the internal packages (the plugins' own tests run in
# test-go). On this 2-core machine it adds under 2 minutes to `make test` with
# a warm build cache, about 7.5 on a cold one (the race build of every
# dependency), so it runs whole, with no tests left out.
test-race: $(TESTSUM)
	ORQEST_FORKCORE=$(FORKCORE) $(TESTSUM) -record $(TEST_RECORD) -label test-race -- $(GO) test -json -race $(GOFLAGS_TEST) ./host/... ./internal/... ./shared/... ./cmd/...

test-example: $(TESTSUM)
	@if [ -d $(EXAMPLE) ]; then cd $(EXAMPLE) && $(GO) vet -mod=mod ./... && $(TESTSUM) -record $(TEST_RECORD) -label test-example -- $(GO) test -json -mod=mod $(GOFLAGS_TEST) ./...; fi

# The Python client (clients/python): its tests with Debian's python3 against
# a real `mcp serve --http` the tests start (tier 1; tier 2 with docker and the
# image, else a loud skip, a failure with ORQEST_REQUIRE_DOCKER=1; the offline
# wheel build and venv install). tests/run.py ends with the count line and
# records it for `make test`'s total.
PYTHON    := /usr/bin/python3
PY_CLIENT := clients/python
PY_DIST   ?= $(CURDIR)/dist
test-python:
	PYTHONDONTWRITEBYTECODE=1 ORQEST_SANDBOX_BIN=$(BIN)/orqest-sandbox $(PYTHON) $(PY_CLIENT)/tests/run.py --record $(TEST_RECORD) --label test-python

# The client's wheel, PY_DIST/orqest_sandbox-$(VERSION)-py3-none-any.whl,
# built offline with Debian's setuptools and wheel (`setup.py bdist_wheel`: no
# pip, no build frontend, nothing from the Python index) from a copy of the
# sources stamped with $(VERSION), so the tree stays clean.
python-client:
	@mkdir -p $(PY_DIST)
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	cp -r $(PY_CLIENT)/orqest_sandbox $(PY_CLIENT)/pyproject.toml $(PY_CLIENT)/setup.py $(PY_CLIENT)/README.md "$$tmp"/ && \
	rm -rf "$$tmp"/orqest_sandbox/__pycache__ && \
	sed -i 's/^version = ".*"/version = "$(VERSION)"/' "$$tmp"/pyproject.toml && \
	sed -i 's/^__version__ = ".*"/__version__ = "$(VERSION)"/' "$$tmp"/orqest_sandbox/client.py && \
	(cd "$$tmp" && $(PYTHON) setup.py -q bdist_wheel -d $(PY_DIST) >"$$tmp"/build.log 2>&1 || { cat "$$tmp"/build.log; exit 1; }) && \
	echo "python-client: $(PY_DIST)/orqest_sandbox-$(VERSION)-py3-none-any.whl"

# The single-node Kubernetes cluster the kubernetes backend's tests run
# against (scripts/k8s/up.sh: built from k8s.io/kubernetes the first time,
# 13-17 min on 2 cores, cached under K8S_ROOT=/var/tmp/orqest-k8s; then about
# a minute). It imports the runtime image from Docker, so build that first.
k8s-up: image
	K8S_IMAGES="$(IMAGE)" VERSION=$(VERSION) bash scripts/k8s/up.sh
k8s-down:
	bash scripts/k8s/down.sh

# The kubernetes backend's tests only, failing (not skipping) without a cluster.
test-k8s:
	ORQEST_REQUIRE_K8S=1 $(GO) test $(GOFLAGS_TEST) ./plugins/kubernetes/...

bench: build image bench-go bench-system

# BenchmarkDataSciencePandas (plugins/docker: a session's first pandas body
# and a warm one) needs the data-science image (make image-datascience); it
# is skipped without it.
bench-go:
	ORQEST_FORKCORE=$(FORKCORE) ORQEST_DOCKER_IMAGE_DS=$(IMAGE_DS) $(GO) test -run '^$$' -bench . -benchmem -count=1 ./validator/ ./plugins/... ./host/

BENCH_SANDBOXES ?= inprocess,forkserver,spawn,docker,gvisor,gvisor-fresh
bench-system:
	$(BIN)/orqest-sandbox bench --config bench.hcl --sandbox $(BENCH_SANDBOXES) -n 300 --concurrency 1 --new-bodies
	$(BIN)/orqest-sandbox bench --config bench.hcl --sandbox $(BENCH_SANDBOXES) -n 300 --concurrency 2
	bash scripts/bench-batch.sh $(BIN)/orqest-sandbox

# The kubernetes rows beside tier 2 in one run (needs `make k8s-up`): Go
# benchmarks (open cold, open from the pool, warm execute) and the
# whole-system load.
bench-k8s: build image
	ORQEST_REQUIRE_K8S=1 $(GO) test -run '^$$' -bench 'OpenClose|OpenFromPool|ExecuteWarm' -benchtime 20x -count=1 ./plugins/docker/ ./plugins/kubernetes/
	$(BIN)/orqest-sandbox bench --config bench.hcl --sandbox docker,kubernetes -n 300 --concurrency 1

# The fuzz targets, package:target (docs/testing.md says what each checks).
# Go fuzzes one target per invocation. `make fuzz` runs each for FUZZTIME;
# one alone, longer: make fuzz FUZZ_TARGETS=./host:FuzzParseConfig FUZZTIME=30m
# A failing input is written to the package's testdata/fuzz/<target>/.
FUZZ_TARGETS ?= \
	./host:FuzzParseConfig \
	./cmd/orqest-sandbox:FuzzMCPHTTP \
	./cmd/orqest-sandbox:FuzzMCPToolArgs \
	./runner:FuzzParseResponse \
	./internal/pyproc:FuzzControlMessages \
	./agent:FuzzReadHello \
	./internal/rtproto:FuzzVerify \
	./internal/rtproto:FuzzCheckID \
	./validator:FuzzCheck \
	./egress:FuzzParseRule
FUZZTIME       ?= 60s
FUZZMINIMIZE   ?= 60s
FUZZTIME_SHORT ?= 8s
# A run that fails without writing a failing input to testdata/fuzz/<target>
# is Go's coordinator stopping while a worker still minimizes an interesting
# input ("context deadline exceeded", seen on a loaded machine): it runs once
# more. One that wrote an input fails at once.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		pkg=$${t%:*}; name=$${t#*:}; \
		for try in 1 2; do \
			before=$$(ls $$pkg/testdata/fuzz/$$name 2>/dev/null | wc -l); \
			echo "$(GO) test -run '^$$' -fuzz '^$$name\$$' -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg"; \
			if $(GO) test -run '^$$' -fuzz "^$$name\$$" -fuzztime $(FUZZTIME) -fuzzminimizetime $(FUZZMINIMIZE) $$pkg; then break; fi; \
			after=$$(ls $$pkg/testdata/fuzz/$$name 2>/dev/null | wc -l); \
			if [ "$$after" != "$$before" ] || [ $$try = 2 ]; then exit 1; fi; \
			echo "$$name: the run ended without a failing input (the coordinator stopped mid-minimization); once more"; \
		done; \
	done

# Every fuzz target for FUZZTIME_SHORT (about 1.5 minutes in all on two
# cores with a warm build cache): what `make test` runs after the tests.
fuzz-short:
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZTIME_SHORT) FUZZMINIMIZE=2s

# Cut a release: checks CHANGELOG.md and a clean tree, builds
# dist/orqest-sandbox-$(VERSION)-linux-ARCH.tar.gz (binaries, SHA256SUMS, the
# plugin catalog lines) and the Python client's wheel beside it
# (python-client), and tags v$(VERSION). See scripts/release.sh.
release:
	bash scripts/release.sh $(VERSION)

# Regenerate the wire code (needs protoc, protoc-gen-go, protoc-gen-go-grpc).
# The generated files are committed so a fresh machine builds without protoc.
proto:
	cd shared/plugin/internal/proto && protoc --go_out=. --go_opt=paths=source_relative \
		--go-grpc_out=. --go-grpc_opt=paths=source_relative sandbox.proto

clean:
	rm -rf $(BIN)
