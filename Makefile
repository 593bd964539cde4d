# The build and test entry points. `make test` is the full gate CI runs.
GO       ?= go
BIN      := bin
# The environment may set GOFLAGS=-buildvcs=false; auto puts the VCS revision into
# --version whenever the tree is a git checkout.
BUILDFLAGS := -buildvcs=auto
# Static binaries (CGO_ENABLED=0): no dynamic loader at start (tamq ping is a
# process start) and nothing to break when the system libc changes. The tests
# keep cgo, which -race needs.
STATIC := CGO_ENABLED=0
# Two modules: this one, the programs, and clustertest, the tests against an
# embedded etcd server (it brings some forty modules, kept out of go.mod),
# joined by go.work for editors and for go commands typed at the root. The
# targets run each module on its own: the programs build from go.mod alone,
# as `go install github.com/tmux-amq/tamq/cmd/...@version` builds them, and a
# GOFLAGS=-mod=mod, which workspace mode refuses, stops nothing.
# clustertest's go.mod replaces this module with this checkout.
export GOWORK := off

.PHONY: all build install deps test check-format vet lint vulncheck diff-check unit smoke bench bench-scale perf chaos fuzz demo clean test-agents test-cluster bench-cluster test-trackers bench-trackers

all: build

build:
	$(STATIC) $(GO) build $(BUILDFLAGS) -o $(BIN)/ ./cmd/...

# install puts tamq and coordination-engine in $(PREFIX)/bin, ~/.local/bin by
# default: where the systemd user units (contrib/systemd) run them from and
# where their PATH looks, so the two agree without a setting
# (internal/layout checks it). `make install PREFIX=/usr/local` puts them in
# /usr/local/bin; go's own GOBIN is not read here, so where they land never
# depends on the caller's go env.
PREFIX ?= $(HOME)/.local
install:
	GOBIN="$(PREFIX)/bin" $(STATIC) $(GO) install $(BUILDFLAGS) ./cmd/...

# Checks that tmux (3.2+), git and gcc are there, and says what is missing and
# how to install it when they are not; it never installs anything, so no
# target here needs sudo. scripts/install-deps (no --check) installs them with
# apt-get: a fresh machine runs it once, and CI before `make test` (.ci/run).
deps:
	@scripts/install-deps --check

test: deps check-format vet build diff-check unit smoke

check-format:
	@out="$$(gofmt -l .)"; if [ -n "$$out" ]; then echo "gofmt needed on:"; echo "$$out"; exit 1; fi

# vet type-checks every package, those without tests too.
vet:
	$(GO) vet ./...

# staticcheck, with the checks staticcheck.conf turns off and why. CI runs it
# after `make test` (.ci/run), not within it: its first run on a machine
# analyses every dependency (modernc's SQLite is large), about two minutes on
# two cores, which would take `make test` past its three; later runs take
# seconds from staticcheck's cache. It is
# pinned by go.mod's tool directive, so it runs from the module cache that
# scripts/install-deps fills (no network). Twice over this module: without
# tags, as vet and the build see the code, and with every tag the Makefile's
# other targets use, so that their files are checked too (a function only a
# tagged file uses is unused without the tag, and staticcheck would say so);
# then over clustertest, whose go.mod names the same staticcheck.
LINT_TAGS := agents trackers
lint:
	$(GO) tool staticcheck ./...
	$(GO) tool staticcheck -tags "$(LINT_TAGS)" ./...
	cd clustertest && $(GO) tool staticcheck ./...

# govulncheck (pinned by go.mod's tool directive) over the programs' code,
# against the Go vulnerability database as the module golang.org/x/vulndb
# holds it at VULNDB_VERSION: its data/osv has one OSV file per
# vulnerability, which govulncheck reads as a database, so it runs from the
# module cache with no network once the module is there (the go mod download
# below fetches it the first time, a 25 MB zip). Where the network is,
# VULNDB=https://vuln.go.dev asks the live database, which the snapshot lags.
# tools/vulngate fails on a vulnerability the programs reach in a module
# they depend on (a change of ours fixes it by moving the module) and
# warns of one in the standard library of the go running it (go1.26.8: 12
# reached, fixed in go1.26.9 and go1.26.10), which the machine's toolchain
# fixes, not the change under test. CI runs it after `make test` (about 30 s
# more, which would take `make test` past three minutes).
VULNDB_VERSION := v0.0.0-20261105234957-e22db6528018
VULNDB ?= file://$$($(GO) mod download golang.org/x/vulndb@$(VULNDB_VERSION) && $(GO) list -m -f '{{.Dir}}' golang.org/x/vulndb@$(VULNDB_VERSION))/data/osv
vulncheck:
	GO=$(GO) $(GO) run ./tools/vulngate -db "$(VULNDB)" ./...

diff-check:
	@if git rev-parse --git-dir >/dev/null 2>&1; then git diff --check HEAD; fi

# The programs and test helpers the integration tests run are built once, as
# the build target builds them (static), instead of once per test package.
# The longest packages are named first so that they start first: go test
# runs packages in the order given, and the run ends with its slowest.
#
# The tests never touch the user's own files or servers. They run with HOME,
# XDG_* and TMUX_TMPDIR pointed into a fresh decoy directory (a test that
# forgets to give a program private directories writes there, not into
# ~/.local/state/tamq or /tmp/tmux-UID/default), without the variables below
# that a user's shell may set to point the programs, gita, tmux or the agents
# at the user's own, and with the go command's cache and settings kept as
# they were (they live under HOME). homeguard then fails the run, naming the
# files, if the decoy holds anything of ours or a path of ours appeared in
# the user's directories (internal/testutil/homeguard).
#
# The packages in RACE_FREE run without the race detector: neither their code
# nor their tests start a goroutine (internal/layout checks it), so it could
# report nothing there, and their SQLite work costs 10 to 17 times the CPU
# under it (the store's tests: 28 s against 1.6 s). The stores run
# concurrently only inside the services, whose tests run with it.
SLOW_PACKAGES := ./internal/tamq/service ./internal/engine/service ./internal/e2e ./tools/tamq-demo
RACE_FREE := ./internal/tamq/store ./internal/engine/store ./internal/sqlitedb
MODULE := github.com/tmux-amq/tamq
USER_VARS := TMUX TMUX_PANE GITA_PROJECT_HOME STATEHUB_API_BASE CLAUDE_CONFIG_DIR CODEX_HOME \
	TAMQ_CONFIG TAMQ_STATE_DIR TAMQ_SOCKET TAMQ_POLICY_PROFILE TAMQ_ENDPOINT TAMQ_HOOK_SOCKET TAMQ_REPO \
	COORDINATION_ENGINE_CONFIG COORDINATION_ENGINE_STATE_DIR COORDINATION_ENGINE_SOCKET COORDINATION_ENGINE_POLICY_PROFILE \
	CLAUDECODE CLAUDE_CODE_ENTRYPOINT GEMINI_CLI CODEX_SANDBOX CODEX_SANDBOX_NETWORK_DISABLED
UNIT_RUN = $(GO) test -race -count=1 -p 4 $(SLOW_PACKAGES) $$($(GO) list ./... | grep -v -x $(foreach p,$(RACE_FREE),-e $(MODULE)/$(p:./%=%))); s=$$?; \
	$(GO) test -count=1 $(RACE_FREE) || s=1; exit $$s
unit:
	@dir="$$(mktemp -d)" && decoy="$$(mktemp -d)" && chmod 755 "$$dir" "$$decoy" && \
	mkdir -p "$$decoy/home" "$$decoy/tmux" && mkdir -m 700 "$$decoy/run" && \
	$(STATIC) $(GO) build -o "$$dir/" ./cmd/... ./tools/tamq-demo ./internal/testutil/squatter ./internal/testutil/scriptedagent ./internal/testutil/homeguard && \
	"$$dir/homeguard" snapshot "$$dir/before" && \
	env $(foreach v,$(USER_VARS),-u $(v)) \
		GOCACHE="$$($(GO) env GOCACHE)" GOMODCACHE="$$($(GO) env GOMODCACHE)" GOPATH="$$($(GO) env GOPATH)" GOENV="$$($(GO) env GOENV)" \
		HOME="$$decoy/home" XDG_CONFIG_HOME="$$decoy/config" XDG_STATE_HOME="$$decoy/state" XDG_CACHE_HOME="$$decoy/cache" \
		XDG_DATA_HOME="$$decoy/data" XDG_RUNTIME_DIR="$$decoy/run" TMUX_TMPDIR="$$decoy/tmux" \
		TAMQ_TEST_BIN="$$dir" sh -c '$(UNIT_RUN)'; status=$$?; \
	if [ -f "$$dir/before" ]; then "$$dir/homeguard" check "$$decoy" "$$dir/before" || status=1; fi; \
	rm -rf "$$dir" "$$decoy"; exit $$status

# The tests against a real etcd live in the module clustertest
# (clustertest/etcdtest embeds its server): the server is large to build
# and its modules stay out of go.mod, so `make test` never builds it (its vet
# and unit tests build internal/cluster, the client, and run its own tests).
# They run as the unit tests do (the programs built once, a decoy home): the
# adapter's and the doctor's own tests, their tests against etcd
# (clustertest/cluster, clustertest/clustercheck), then three hosts' engines
# as processes against one State Hub and one etcd (clustertest/engine).
# About three minutes.
CLUSTER_PACKAGES := ./internal/cluster/... ./internal/doctor/clustercheck
CLUSTER_TESTS := ./cluster ./clustercheck
test-cluster: deps
	cd clustertest && $(GO) vet ./...
	@$(MAKE) --no-print-directory unit UNIT_RUN='$(GO) test -race -count=1 -timeout 5m $(CLUSTER_PACKAGES) && cd clustertest && \
		$(GO) test -race -count=1 -timeout 5m $(CLUSTER_TESTS) && \
		$(GO) test -race -count=1 -timeout 5m ./engine'

# The trackers behind the State Hub port against the real thing (build tag
# trackers): the beads driver's conformance suite and the loop driven from
# beads, against the pinned bd, which scripts/install-bd builds once into a
# cache (cold: 4 to 8 minutes; warm: nothing). About two minutes.
TRACKER_PACKAGES := ./internal/statehub/beads ./internal/engine/service
test-trackers: deps
	$(GO) vet -tags trackers $(TRACKER_PACKAGES)
	@TAMQ_TEST_BD="$$(scripts/install-bd)" && export TAMQ_TEST_BD && \
	$(MAKE) --no-print-directory unit UNIT_RUN='$(GO) test -count=1 -timeout 10m -tags trackers ./internal/statehub/beads && \
		$(GO) test -count=1 -timeout 10m -tags trackers -run "^TestBeads" ./internal/engine/service'

# The cost of beads as State Hub while nothing changes, against a look that
# reads every database, and the time from a person's `bd close` to the wake
# it frees (docs/performance.md): 5 repos of 200 issues, the real bd.
bench-trackers: deps
	@TAMQ_TEST_BD="$$(scripts/install-bd)" && export TAMQ_TEST_BD && \
	$(MAKE) --no-print-directory unit UNIT_RUN='$(GO) test -run "^$$$$" -bench BeadsIdle -benchtime 5x -tags trackers ./internal/engine/service'

smoke: build
	$(BIN)/tamq --help >/dev/null
	$(BIN)/tamq --version
	$(BIN)/coordination-engine --help >/dev/null
	$(BIN)/coordination-engine --version

bench:
	$(GO) test -run='^$$' -bench=. -benchmem ./...

# A claim and release on etcd against the engine's own SQLite lease offer,
# measured in the same run (clustertest/cluster's BenchmarkClaimVsOffer); then
# wakes per second across three hosts against one host alone
# (clustertest/engine's BenchmarkClusterWakesPerSecond, with the programs
# built as the tests build them).
bench-cluster:
	cd clustertest && $(GO) test -run='^$$' -bench=. -benchtime=2000x ./cluster
	@$(MAKE) --no-print-directory unit UNIT_RUN='cd clustertest && $(GO) test -run "^$$$$" -bench ClusterWakesPerSecond -benchtime 3x ./engine'

# The side-by-side table of docs/performance.md: the benchmarks behind it, one
# after another in one run, each figure beside its floor from the same run
# (tools/perftable; about 6 minutes on a 2-core machine, a third of it building a
# million messages).
perf: deps
	$(GO) run ./tools/perftable $(PERFFLAGS)

# The scale benchmark alone (docs/performance.md, "Scale"): both daemons, 20
# tmux servers, 195 windows with brokers, 10,000 State Hub tasks; about two
# minutes a run, BENCH_COUNT runs.
BENCH_COUNT ?= 2
bench-scale: deps
	@dir="$$(mktemp -d)" && chmod 755 "$$dir" && \
	$(STATIC) $(GO) build -o "$$dir/" ./cmd/... ./tools/tamq-demo ./internal/testutil/squatter ./internal/testutil/scriptedagent && \
	TAMQ_TEST_BIN="$$dir" $(GO) test -run='^$$' -bench='^BenchmarkScale$$' -benchtime=1x -count=$(BENCH_COUNT) -timeout 60m ./internal/scalebench; \
	status=$$?; rm -rf "$$dir"; exit $$status

# Crash campaigns (docs/reliability.md): each daemon killed (SIGKILL) at
# CHAOS_ROUNDS random moments under load, and each one's disk filled and
# freed (TestChaos*DiskFull); `make test` runs three kills of each and those.
CHAOS_ROUNDS ?= 100
chaos: deps
	@dir="$$(mktemp -d)" && chmod 755 "$$dir" && \
	$(STATIC) $(GO) build -o "$$dir/" ./cmd/... ./internal/testutil/scriptedagent && \
	TAMQ_TEST_BIN="$$dir" TAMQ_CHAOS_ROUNDS=$(CHAOS_ROUNDS) $(GO) test -count=1 -timeout 60m -v -run '^TestChaos' \
		./internal/tamq/service ./internal/engine/service > "$$dir/chaos.log" 2>&1; status=$$?; \
	grep -E '^(--- |ok|FAIL)|chaos|kills|integrity|never|doubled' "$$dir/chaos.log"; \
	if [ $$status -ne 0 ]; then tail -n 40 "$$dir/chaos.log"; fi; rm -rf "$$dir"; exit $$status

# The fuzz targets (docs/fuzzing.md), as package:FuzzName, all in this one
# list. `make fuzz` runs each for FUZZTIME, one after another (go test -fuzz
# takes one target at a time): go test -run='^$$' -fuzz='^Name$$'
# -fuzztime=$(FUZZTIME) ./pkg. Their seed corpora run in `make test` as
# ordinary tests.
FUZZTIME ?= 30s
FUZZ_TARGETS := \
	./internal/unixrpc:FuzzFrames \
	./internal/queue:FuzzReadAddress \
	./internal/tamq/broker:FuzzObserver \
	./internal/tamq/broker:FuzzInputFilter \
	./internal/jsonl:FuzzDecodeLine \
	./internal/config:FuzzLoad \
	./internal/statehub:FuzzAnswers \
	./internal/statehub/github:FuzzParseRemote \
	./internal/gita:FuzzParseRepos \
	./internal/gita:FuzzParseGroups \
	./internal/tmux:FuzzParseWindows \
	./internal/tmux:FuzzParseCapture \
	./internal/textsafe:FuzzEscapeIsInert \
	./internal/textsafe:FuzzEscapeTextIsInert

fuzz:
	@GO=$(GO) FUZZTIME=$(FUZZTIME) scripts/fuzz $(FUZZ_TARGETS)

# The first-run demo (docs/demo.md): make demo DEMOFLAGS=--keep leaves it running.
# It builds only what it runs (tamq, coordination-engine and the demo) in one
# go build, so the packages they share compile once. The first build on a
# machine compiles every dependency (SQLite is the bulk of it), so it says so
# before starting rather than sit silent for minutes.
DEMO_PROGRAMS := ./cmd/tamq ./cmd/coordination-engine ./tools/tamq-demo
demo: deps
	@echo "demo: building tamq, coordination-engine and the demo into $(BIN)/ (the first time: about 2-4 minutes while Go fetches and compiles the dependencies; then seconds)"
	@$(STATIC) $(GO) build $(BUILDFLAGS) -o $(BIN)/ $(DEMO_PROGRAMS)
	@echo "demo: built; running it (about ten seconds)"
	$(BIN)/tamq-demo --tamq $(BIN)/tamq --engine $(BIN)/coordination-engine $(DEMOFLAGS)

# The real agents, offline (not part of `make test`; CI runs it after): installs
# Claude Code, Codex and Gemini CLI from npm at the versions of test/agents/package-lock.json
# into .agents/ (AGENTS=latest: the newest, with Node 22, into .agents-latest/)
# and runs them under tamq against our scripted model server with fake keys
# (docs/agents.md). A failure saves the windows' screens in .agents-screens/.
test-agents: deps
	@dir="$$(scripts/install-agents)" && \
	TAMQ_TEST_AGENTS="$$dir" $(GO) test -tags agents -count=1 -timeout 20m -run 'TestRealAgents|TestRealLoop|TestModelServerDrivesRealAgents|TestRecordPastes|TestRecordGeminiScreens' -v \
		./internal/engine/service/ ./internal/tamq/service/ ./internal/tamq/agentsetup/ ./internal/testutil/modelserver/ ./internal/tamq/broker/

clean:
	rm -rf $(BIN)
