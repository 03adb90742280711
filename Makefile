# eskv: `make run` starts the local stack, `make test` runs every test.
SHELL := bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

# Every go command of these targets (and of the scripts and tests they
# start) builds with -trimpath, as the release does: Go's build cache keys
# a package built without it by its directory, so each clone of the
# repository (CI's, make test-scripts' two) compiled every package of the
# module again; with it, a clone reuses what another checkout compiled
# (the module's packages under -race: 108 s of compiling, 66 with the
# cache of another clone, on 2 cores). The binaries hold no path of the
# checkout.
export GOFLAGS := $(strip $(GOFLAGS) -trimpath)

.PHONY: run test test-modules test-clients warm test-conformance compat test-typescript test-python-unit test-unit test-scripts test-docs fuzz lint build release bench chaos clean shape deploy-check deploy-k8s obs-check

run:
	bash scripts/run-local.sh

# contract/ (the vocabulary server and clients share), client/ (the Go
# client, which users import without the server's dependencies) and tools/
# (eskvbench, eskvchaos) are modules of their own: every target that checks
# the product checks them too.
MODULES := contract client tools

# conformance/ runs on a line of its own (test-conformance), its subtests'
# names shown, so it is left out of the main go test line. The TypeScript
# client's drift check, build and unit tests come first (test-typescript);
# the Python client's tests, unit and integration, run inside the
# conformance test (its python-suite subtests).
test:
	bash scripts/test-services.sh
	go vet ./...
	start=$$SECONDS; go test -race -count=1 -timeout 15m $$(go list ./... | grep -v '/conformance$$') && \
		echo "make test: the root module's packages took $$((SECONDS - start)) s"
	start=$$SECONDS; $(MAKE) --no-print-directory -j2 --output-sync=target test-modules test-clients && \
		echo "make test: the other modules and the clients took $$((SECONDS - start)) s"

# The other modules' packages; and beside them (make test -j2: each
# leaves much of the machine idle) the TypeScript client, then the
# clients' conformance scenarios, which run against its build. Each
# prints its output when it ended. (Beside the root module's packages
# too, -j3, they only lengthened e2e, the longest, by as much: CPU
# bound.)
test-modules:
	for m in $(MODULES); do (cd $$m && go vet ./... && go test -race -count=1 ./...); done

test-clients:
	$(MAKE) --no-print-directory test-typescript
	$(MAKE) --no-print-directory test-conformance

# The clients' conformance scenarios (docs/clients.md#conformance): every
# scenario of every client (go, python, typescript) as the subtest
# TestConformance/<client>/<scenario>, against writers and a projector as
# processes behind a fail-over proxy, and the proxy's own tests. It prints
# the --- PASS/FAIL lines, and the whole output when a test failed. The
# runners' dependencies are installed here, before go test: the TypeScript
# runner imports the build (clients/typescript/dist; npm ci when
# package-lock.json is newer than node_modules, as test-typescript does).
test-conformance:
	cd clients/typescript && { [[ node_modules/.package-lock.json -nt package-lock.json ]] || npm ci --no-audit --no-fund; }
	cd clients/typescript && npm run --silent build
	@out=$$(mktemp); trap 'rm -f "$$out"' EXIT; \
	if go test -race -count=1 -v -timeout 10m ./conformance/ >"$$out" 2>&1; then \
		grep -E -- '--- (PASS|FAIL|SKIP)|^(ok|FAIL|PASS)' "$$out"; \
	else grep -v '^=== ' "$$out"; exit 1; fi

# Checks against software outside Go, printing what they saw: a kafkajs
# consumer reads both topics read_committed and validates every record
# (docs/consumers.md); every ClickHouse statement of the audit trail runs
# on 18.16 and on chDB 26.x (docs/audit.md). Their pinned dependencies
# are installed when package-lock.json is newer than node_modules: npm ci
# for kafkajs; npm install (which keeps the lock file's versions) for
# chDB, whose lock file holds only the linux-x64 library of its optional
# platform packages, the one the registry serves, which npm ci refuses.
# Both also run in make test, quietly.
compat:
	bash scripts/test-services.sh
	cd tools/foreign-consumer && { [[ node_modules/.package-lock.json -nt package-lock.json ]] || npm ci --no-audit --no-fund; }
	cd tools/chcheck && { [[ node_modules/.package-lock.json -nt package-lock.json ]] || npm install --no-audit --no-fund; }
	cd tools && go test -count=1 -v -run '^TestForeignConsumer$$' ./foreign-consumer/ | grep -v '^=== '
	go test -count=1 -v -run '^TestStatementsOnEveryVersion$$' ./audit/ | grep -v '^=== '

# The TypeScript client (clients/typescript, docs/clients.md): its pinned
# dev dependencies (typescript, openapi-typescript) installed when
# package-lock.json is newer than node_modules; src/schema.ts checked
# against schemas/openapi.yaml (regenerated into a temporary file: the
# spec and the types cannot drift); the ESM and CJS builds; the unit
# tests (node:test, a fake fetch, no server). The conformance harness
# runs test/conformance.mjs against the build.
test-typescript:
	cd clients/typescript && { [[ node_modules/.package-lock.json -nt package-lock.json ]] || npm ci --no-audit --no-fund; }
	cd clients/typescript && npm run --silent check-types
	cd clients/typescript && npm run --silent build
	cd clients/typescript && npm test --silent

test-unit:
	ESKV_UNIT_ONLY=1 go test -short ./...
	for m in $(MODULES); do (cd $$m && ESKV_UNIT_ONLY=1 go test -short ./...); done

# The Python client's unit tests (clients/python, standard library only):
# its core, both clients over fake transports, no server.
test-python-unit:
	cd clients/python && python3 -m unittest discover -s tests -p 'test_unit*.py'

# make run / make clean as a user meets them, from temporary clones on free
# ports: run, Ctrl-C, clean, run again, two clones side by side; 10 SIGTERM
# and 10 SIGINT stops leave no service running; a killed writer comes back;
# and make test-docs beside it (its own clone and ports; each uses about
# one core, mostly waiting for stacks to start and stop), its output shown
# when it ended. test-local-stack.sh stays in the foreground: it sends
# Ctrl-C, which a background job of a non-interactive shell ignores.
test-scripts:
	@docs=$$(mktemp); trap 'rm -f "$$docs"' EXIT; \
	bash scripts/test-docs.sh >"$$docs" 2>&1 & pid=$$!; \
	trap 'kill -TERM $$pid 2>/dev/null; exit 130' INT TERM; \
	rc=0; bash scripts/test-local-stack.sh || rc=$$?; \
	wait $$pid || rc=$$?; cat "$$docs"; exit $$rc

# The README and docs/: every relative link resolves, and every block
# fenced ```sh runs against a stack started as make run starts it
# (scripts/test-docs.sh; blocks fenced ```text are not run).
test-docs:
	bash scripts/test-docs.sh

# Bounded fuzzing of the HTTP handlers (bodies, query strings, paths):
# no 5xx, no panic, nothing reaches the writer from a rejected request.
# FUZZTIME=5m make fuzz for a longer run.
FUZZTIME ?= 30s
FUZZ := '^FuzzHandlers$$'
fuzz:
	go test ./api -run '^$$' -fuzz $(FUZZ) -fuzztime $(FUZZTIME)

# What make fuzz and make release (RELEASE_FAST=1) compile in build modes
# of their own (the fuzzer's instrumentation of every package; static and
# -trimpath), into the build cache, running nothing: with a cold cache
# that is about 3 minutes each on 2 cores. CI runs it at nice 19 beside
# make test, on the CPU the tests leave idle.
warm:
	go test -c -fuzz $(FUZZ) -o /dev/null ./api
	RELEASE_FAST=1 bash scripts/release.sh warm

lint:
	@unformatted=$$(gofmt -l .); \
	if [[ -n $$unformatted ]]; then echo "gofmt -l: not formatted:"; echo "$$unformatted"; exit 1; fi
	bash scripts/ensure-tools.sh
	for m in . $(MODULES); do (cd $$m && go vet ./... && "$$(go env GOPATH)/bin/staticcheck" ./... && go mod tidy -diff); done

# Every command of cmd/, kvctl and kvstore among them, stamped with the
# version (git describe --tags --always --dirty, or VERSION=...) and the
# revision that --version, kvctl version and eskv_build_info report
# (scripts/version.sh).
build:
	go build -ldflags "$$(bash scripts/version.sh | sed -n 3p)" -o bin/ ./cmd/...

# The release artifacts of this checkout in dist/<version>/: archives for
# linux and darwin (amd64, arm64), OCI image archives (linux/amd64 and
# arm64, checked by reading them back), CycloneDX SBOMs, SHA256SUMS
# (docs/release.md). RELEASE_FAST=1 builds linux/amd64 alone (CI).
release:
	bash scripts/release.sh

# deploy/observability: promtool check rules on the alert rules (through
# Prometheus's rulefmt library: no binary to install), and every metric the
# rules and the Grafana dashboard query exists (tools/obscheck).
obs-check:
	cd tools && go test -count=1 ./obscheck/

bench:
	bash scripts/ensure-clickhouse.sh # for the auditor's figures (7a, 7b)
	bash scripts/ensure-peers.sh # etcd, NATS, Redis for figure 18 (missing ones print as unavailable)
	cd tools && go run ./eskvbench $(BENCH_ARGS)

# Fault harness: real processes, SIGKILL/SIGSTOP, linearizability and log
# checks (docs/chaos.md). CHAOS_SECONDS=60 make chaos for a shorter run.
# Then the hostile-load phase (-hostile, about 40 s): every attack of an
# anonymous client and of a tenant at once against two writers, while a
# well-behaved tenant's p99, errors and the writers' RSS are checked.
# The fault phase needs Postgres, ClickHouse (the auditor's trail), root and
# iproute2 (network namespaces: -net-faults).
chaos:
	bash scripts/ensure-postgres.sh
	bash scripts/ensure-clickhouse.sh
	command -v ip >/dev/null || (apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq iproute2)
	cd tools && go run ./eskvchaos $(CHAOS_ARGS)
	cd tools && go run ./eskvchaos -hostile -writers 2 -projectors 1 $(HOSTILE_ARGS)

# .eskv/ and this clone's databases eskv_<stack-id> (scripts/clean-local.sh).
clean:
	bash scripts/clean-local.sh
	rm -rf bin dist

# Code-shape figures: duplicates, the core (writer/, parameter lists, the
# contract's exports, JSON scanners, doc lengths), long functions, undocumented
# packages, cmd/'s share of the lines, go mod tidy in every module.
shape:
	bash scripts/shape.sh

# The Helm chart and deploy/k8s as a cluster takes them, offline: helm
# lint, kubeconform -strict (schemas generated from the Kubernetes OpenAPI
# document of the k8s.io/kubernetes module and the Prometheus Operator's
# CRDs), kube-score with no finding, unknown values refused
# (values.schema.json), tools/deploycheck, deploy/k8s/eskv.yaml equal to
# the chart's rendering. Tools install with go install on first use
# (docs/deploy.md).
deploy-check:
	bash scripts/deploy-check.sh

# Regenerate deploy/k8s/eskv.yaml from the chart after changing it.
deploy-k8s:
	bash scripts/render-k8s.sh
