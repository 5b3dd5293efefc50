# Habits a contributor expects. Every target is a short name for a command
# that also works on its own (CONTRIBUTING.md); .ci/run installs the guest
# toolchains and packages, then runs `make ci-checks` and the README's test
# command, then the benchmark comparison (`make ci` is that whole sequence).

GO ?= go
# golangci-lint, pinned; installed once into the same cache as CI's cosign.
GOLANGCI_LINT_VERSION := v2.15.0
TOOLBIN ?= $(HOME)/.cache/packrun-ci/bin
GOLANGCI_LINT := $(TOOLBIN)/golangci-lint
# The packages whose tests run under the race detector: the root (the Host
# and its goroutines), the dispatcher, both stores and the witness (one lock
# over check and update).
RACE_PKGS := . ./internal/dispatch ./internal/store/sqlite ./internal/store/postgres ./internal/evidence/witness

# The dupl build golangci-lint v2.15.0 uses, run as a program (dupl-stores).
DUPL_VERSION := v0.0.0-20260401084720-c99c5cf5c202

.PHONY: test race lint dupl-stores fuzz bench ci ci-checks rebuild fmt vet

# The README's test command.
test:
	GOFLAGS="$$($(GO) env GOFLAGS) -timeout=30m" $(GO) test ./...

race:
	GOFLAGS="$$($(GO) env GOFLAGS) -timeout=30m" $(GO) test -race $(RACE_PKGS)

$(GOLANGCI_LINT):
	GOBIN=$(TOOLBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)

lint: $(GOLANGCI_LINT)
	@$(GOLANGCI_LINT) version | grep -q '$(GOLANGCI_LINT_VERSION:v%=%)' || GOBIN=$(TOOLBIN) $(GO) install github.com/golangci/golangci-lint/v2/cmd/golangci-lint@$(GOLANGCI_LINT_VERSION)
	$(GOLANGCI_LINT) run ./...

# Copies between the two store drivers. golangci-lint's dupl sees one package
# at a time, so this runs dupl over both directories at once and prints only
# the pairs with one side in each (threshold as in .golangci.yml). It
# informs (the store rules written once remove the copies); it does not fail.
dupl-stores:
	@$(GO) run github.com/golangci/dupl@$(DUPL_VERSION) -plumbing -t 100 internal/store/sqlite internal/store/postgres \
	  | grep -E '^internal/store/sqlite/[^:]+:[0-9-]+: duplicate of internal/store/postgres/|^internal/store/postgres/[^:]+:[0-9-]+: duplicate of internal/store/sqlite/' \
	  | grep -v _test.go | sort | tee /dev/stderr | wc -l | sed 's/$$/ cross-store duplicate fragments (dupl -t 100)/'

# The short fuzz sessions (one list: scripts/fuzz). FUZZ=regex runs a part.
fuzz:
	bash scripts/fuzz $(FUZZ)

# Headline benchmarks against a baseline (default origin/main, else main):
# BASE=<commit>, and the BENCH_* variables of scripts/bench-compare.
bench:
	bash scripts/bench-compare $(BASE)

# Every example, SDK example and fixture rebuilt from source must match the
# committed .wasm byte for byte (needs the toolchains .ci/run installs).
rebuild:
	bash examples/build.sh
	bash testdata/hostile/build.sh
	bash testdata/modules/build.sh
	bash testdata/bench/build.sh
	bash testdata/extism-fetch/build.sh
	for sdk in abi/guest/go/build.sh abi/guest/assemblyscript/build.sh abi/guest/c/example/build.sh abi/guest/rust/example/build.sh abi/guest/wat/build.sh; do \
	  echo "==> $$sdk"; bash "$$sdk" || exit 1; \
	done
	@if ! git diff --quiet -- examples testdata abi; then \
	  echo "rebuilt .wasm files differ from the committed ones:" >&2; \
	  git diff --stat -- examples testdata abi >&2; exit 1; \
	fi
	@if [ -n "$$(git status --porcelain --untracked-files=all -- examples testdata abi | grep -v node_modules)" ]; then \
	  echo "the rebuild left files git does not know:" >&2; \
	  git status --porcelain --untracked-files=all -- examples testdata abi >&2; exit 1; \
	fi

fmt:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	if [ -n "$$unformatted" ]; then echo "not gofmt-formatted:"; echo "$$unformatted"; exit 1; fi

vet:
	$(GO) vet ./...

# What CI checks before the tests (lint installs its pinned golangci-lint
# into TOOLBIN on first use).
ci-checks: rebuild fmt vet lint fuzz

# What .ci/run runs after installing packages: the checks, the README's test
# command, the race detector, then the benchmark comparison (informational,
# never fails).
ci: ci-checks test race
	BENCH_QUICK=1 BENCH_COUNT=2 timeout 900 bash scripts/bench-compare HEAD~1 || true
