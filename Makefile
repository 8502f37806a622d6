# airlock — build, test and benchmark.
#
#   make test    install what the tests need (when missing) and run every test
#   make bench   run the side-by-side benchmarks (see docs/benchmarks.md)
#   make fuzz    run every fuzz target for longer than the test run does

GO          ?= go
TEST_TIMEOUT ?= 30m
BENCH_TIME  ?= 1s
BENCH_COUNT ?= 6
BENCHSTAT   ?= $(GO) run golang.org/x/perf/cmd/benchstat@v0.0.0-20260908200009-22c9c6c9d4da
FUZZ_TIME   ?= 60s
# FUZZ_SHORT is how long `make test` runs each fuzz target (make fuzz: FUZZ_TIME).
FUZZ_SHORT  ?= 3s
PKGS        ?= ./...

.PHONY: all build test test-deps vet bench bench-report fuzz soak clean

all: build

# airlock-action runs on targets and airlock-ssh starts once per action:
# both are built static (no cgo), with no runtime dependency and a quicker
# start. airlock needs cgo for SQLite.
build:
	$(GO) build ./...
	CGO_ENABLED=0 $(GO) build -o bin/ ./cmd/airlock-action ./cmd/airlock-ssh
	$(GO) build -o bin/ ./cmd/airlock

# test-deps installs the real peers the tests talk to: OpenSSH's sshd and
# client, and the dedicated login account with /bin/sh as its shell.
test-deps:
	@bash .ci/test-deps

vet:
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard -- '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

# The state store's tests run a second time on PostgreSQL (a throwaway
# cluster they start themselves), so both engines keep one behaviour.
test: test-deps vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)
	AIRLOCK_TEST_STORAGE=postgres $(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) ./approvals/
	@bash .ci/fuzz $(FUZZ_SHORT)

# bench runs every benchmark BENCH_COUNT times into .bench/bench.txt and
# summarises it with benchstat: sub-benchmarks named impl=… are compared side
# by side, with ratios against the first implementation.
bench: test-deps
	@mkdir -p .bench
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count $(BENCH_COUNT) -timeout 90m $(PKGS) | tee .bench/bench.txt
	$(BENCHSTAT) -col /impl .bench/bench.txt

# bench-report measures the system benchmark report (docs/benchmarks-report.md
# and docs/benchmarks-latency.png): every path side by side against one sshd.
# Run it on an idle machine and commit both files.
bench-report: test-deps
	@GO="$(GO)" bash .ci/bench-report

fuzz:
	@bash .ci/fuzz $(FUZZ_TIME)

# soak runs the system suite at full size: 10,000 actions, longer slow-client
# holds (docs/reliability.md).
soak: test-deps
	AIRLOCK_SOAK=1 $(GO) test -race -count=1 -timeout 30m ./gateway/systemtest/

clean:
	$(GO) clean -testcache
