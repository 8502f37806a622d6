# airlock — build, test and benchmark.
#
#   make test    install what the tests need (when missing) and run every test
#   make bench   run the side-by-side benchmarks (see docs/benchmarks.md)
#   make fuzz    run every fuzz target for longer than the test run does

GO          ?= go
TEST_TIMEOUT ?= 30m
BENCH_TIME  ?= 200x
FUZZ_TIME   ?= 60s
PKGS        ?= ./...

.PHONY: all build test test-deps vet bench fuzz clean

all: build

build:
	$(GO) build ./...

# test-deps installs the real peers the tests talk to: OpenSSH's sshd and
# client, and the dedicated login account with /bin/sh as its shell.
test-deps:
	@bash .ci/test-deps

vet:
	@unformatted=$$(gofmt -l $$(git ls-files -co --exclude-standard -- '*.go')); \
	if [ -n "$$unformatted" ]; then echo "gofmt would change:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

test: test-deps vet
	$(GO) test -race -count=1 -timeout $(TEST_TIMEOUT) $(PKGS)

bench: test-deps
	$(GO) test -run '^$$' -bench . -benchmem -benchtime $(BENCH_TIME) -count 6 -timeout 60m $(PKGS)

fuzz:
	@bash .ci/fuzz $(FUZZ_TIME)

clean:
	$(GO) clean -testcache
