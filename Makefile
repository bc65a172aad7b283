# drover — build, test and run the dev stack. README.md and docs/testing.md
# say what each target needs (RabbitMQ and PostgreSQL on the machine;
# Temporal and Kafka come from Go modules).

# The temporal CLI (dev server 1.29.1, UI 2.42.1). Newer tags refuse `go install`
# (their go.mod has a replace directive). Its --version says 0.0.0-DEV, so the
# stamp file records which version bin/ holds.
TEMPORAL_CLI_VERSION := v1.5.1
TEMPORAL_STAMP := bin/.temporal-version

GO ?= go
# Flags of the benchmark suite (cd bench && go run ./cmd/bench -h), e.g.
# BENCH_FLAGS='-cpuprofile out/drover.cpu' or '-fleets 1,4,16,64'; it runs
# in bench/ (its own module), so relative paths are bench/'s.
BENCH_FLAGS ?=

.PHONY: all unit test test-long test-cluster bench chaos load dev demo build lint clean distclean bin/temporal

all: build

# Rebuilt only when missing or when TEMPORAL_CLI_VERSION changes (about 3.5
# minutes cold); the stamp is written after a successful install only.
bin/temporal:
	@if [ -x $@ ] && [ "$$(cat $(TEMPORAL_STAMP) 2>/dev/null)" = "$(TEMPORAL_CLI_VERSION)" ]; then \
		:; \
	else \
		echo "installing temporal CLI $(TEMPORAL_CLI_VERSION) into bin/ (about 3.5 minutes cold)"; \
		mkdir -p bin && rm -f $(TEMPORAL_STAMP) && \
		GOBIN=$(CURDIR)/bin $(GO) install github.com/temporalio/cli/cmd/temporal@$(TEMPORAL_CLI_VERSION) && \
		echo "$(TEMPORAL_CLI_VERSION)" > $(TEMPORAL_STAMP); \
	fi

# The fast tier, for every change: go test -short, which skips each test
# that needs RabbitMQ, PostgreSQL, a Temporal dev server, a browser or
# another program of the machine, or takes more than a few seconds
# (internal/testenv says which), so it needs none of them, nor bin/temporal.
# Under a minute on 2 cores with the build cache warm (a first run compiles
# everything: about 5 minutes); no -race (make test has it). -timeout bounds
# a test that starts waiting on a service it should have skipped for.
unit:
	$(GO) test -short -count=1 -timeout 3m ./...
	cd bench && $(GO) test -short -count=1 -timeout 3m ./...

# Integration tests start their own Temporal dev server from bin/temporal and
# their own in-memory Kafka on free ports, and use the machine's RabbitMQ and
# PostgreSQL. -p stays at its default (GOMAXPROCS, 2 here).
# bench/ is a module of its own (Colly stays out of the crawler's graph):
# `./...` at the root skips it, so its vet and its (quick) tests run apart.
test: bin/temporal
	$(GO) vet ./... && $(GO) test -race -count=1 -timeout 20m ./...
	cd bench && $(GO) vet ./... && $(GO) test -count=1 -timeout 5m ./...

# The faults on a private three-node RabbitMQ cluster (systest/cluster_test.go):
# two minutes, left out of `make test`'s 20; .ci/run runs both.
# The long tier: the system and frontier tests that call testenv.Long (a
# million seeds, a 300 MiB body, a scheduler or worker killed in the middle
# of a recrawl or a crawl log, a parked URL RabbitMQ hands back after its
# 3-minute confirm timeout), which `make test` skips to stay within its 20
# minutes (docs/testing.md). The lists are read from the tests themselves.
long_tests = $(shell awk '/^func Test/{n=substr($$2, 1, index($$2, "\050") - 1)} /testenv\.Long/{print n}' $(1)/*_test.go | sort -u | paste -sd'|' -)
LONG_TESTS = $(call long_tests,systest)
LONG_FRONTIER_TESTS = $(call long_tests,frontier)
test-long: bin/temporal
	@test -n '$(LONG_TESTS)' || { echo "no test calls testenv.Long in systest/"; exit 1; }
	DROVER_LONG=1 $(GO) test -race -count=1 -timeout 30m -run '^($(LONG_TESTS))$$' ./systest
	@test -z '$(LONG_FRONTIER_TESTS)' || DROVER_LONG=1 $(GO) test -race -count=1 -timeout 10m -run '^($(LONG_FRONTIER_TESTS))$$' ./frontier

test-cluster: bin/temporal
	DROVER_CLUSTER=1 $(GO) test -race -count=1 -timeout 15m -run 'TestQuorumShardsOnACluster' ./systest

# The benchmark suite (bench/README.md): drover's whole stack at fleets 1, 4
# and 16, Colly v2 and raw GETs on one test web, then a politeness-bound web;
# prints a markdown table and writes bench/results.md. Run it on a quiet
# machine: it uses both cores for several minutes. Then the seen-set at
# 10 M URLs, Pebble against the old LogSeen (bench/README.md, "The
# seen-set"; 20 minutes or more), its table also in out/seen.md.
# Scrapy, a peer, is Debian's python3-scrapy: installed here when missing
# and run as root (apt bounded like .ci/run's), else its rows say how.
bench: bin/temporal
	@/usr/bin/python3 -c 'import scrapy' 2>/dev/null || \
	if [ "$$(id -u)" -eq 0 ] && command -v apt-get >/dev/null; then \
		echo "installing python3-scrapy (apt-get, at most 600 s)"; \
		timeout 600 sh -c 'apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq python3-scrapy' || \
		echo "python3-scrapy not installed: the scrapy rows will fail (apt-get install python3-scrapy)"; \
	else echo "python3-scrapy missing: apt-get install python3-scrapy, or BENCH_FLAGS=-peers=colly"; fi
	cd bench && mkdir -p out && $(GO) run ./cmd/bench $(BENCH_FLAGS)
	cd bench && $(GO) run ./cmd/seenbench -stores pebble,log > out/seen.md && cat out/seen.md

# Each of drover's dependencies broken once, alone, in the middle of a crawl
# of 10,000 test-web pages; prints one table (chaos/, about 20 minutes).
# Needs root (a tmpfs, a private RabbitMQ node) and PostgreSQL on :5432.
# CHAOS_FLAGS='-faults worker-kill,kafka-outage' runs some rows only.
CHAOS_FLAGS ?=
chaos: bin/temporal
	nice -n 10 $(GO) run ./chaos/cmd/chaos $(CHAOS_FLAGS)

# 64 fetchers over 3 worker processes and 2 schedulers crawl a web of 1,000
# hosts on a private RabbitMQ node; prints each process's RSS at 25%, 50%
# and 100% of the crawl and its peak (chaos/load.go, a few minutes).
# LOAD_FLAGS='-hosts 200' for a smaller web.
LOAD_FLAGS ?=
load: bin/temporal
	nice -n 10 $(GO) run ./chaos/cmd/load $(LOAD_FLAGS)

# Temporal (data/temporal.db, UI on :8233), Kafka (data/kafka), RabbitMQ check,
# scheduler and worker, each a process restarted when it dies (logs in
# data/log/), in the foreground.
dev: bin/temporal
	$(GO) run ./devstack/cmd/dev


# The dev stack plus a demo campaign against a local test web;
# SEED=https://example.org/ crawls that site instead (500 pages at most).
demo: bin/temporal
	$(GO) run ./devstack/cmd/demo $(if $(SEED),-seed '$(SEED)')

build:
	$(GO) build -o bin/ ./worker ./scheduler ./starter

# gofmt and go vet always; staticcheck when installed
# (go install honnef.co/go/tools/cmd/staticcheck@latest).
lint:
	@out="$$(gofmt -l $$(find . -name '*.go' -not -path './bin/*' -not -path '*/node_modules/*'))"; \
	if [ -n "$$out" ]; then echo "gofmt -l:"; echo "$$out"; exit 1; fi
	$(GO) vet ./... && cd bench && $(GO) vet ./...
	@if command -v staticcheck >/dev/null 2>&1; then staticcheck ./... && cd bench && staticcheck ./...; \
	else echo "staticcheck not installed; skipped"; fi

# Build outputs only: bin/temporal (slow to rebuild) and data/ (the dev
# stack's campaigns) stay; `make distclean` removes them too.
clean:
	rm -rf out/ bin/worker bin/scheduler bin/starter
	$(GO) clean -testcache

distclean: clean
	rm -rf bin/ data/
