# sandbox-executor: `make run` starts the agent on loopback with a development
# secret it prints; `make test` runs everything CI runs.
#
# `make test` needs Linux, Go, a C compiler (for -race) and, for what it
# installs from Debian when missing (ripgrep, curl, Node.js and npm,
# python3-requests, docker.io, busybox-static), root; as another user it says
# what to install.

GO        ?= go
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.8.2
# The version comes from the VERSION file. In a git checkout that is not
# exactly at tag v<VERSION>, or has uncommitted changes, it becomes
# <VERSION>-dev+<commit>[.dirty]. Override it with VERSION=... make build.
ifndef VERSION
VERSION := $(shell v=$$(cat VERSION); \
  if c=$$(git rev-parse --short=12 HEAD 2>/dev/null); then \
    if ! git diff --quiet HEAD -- 2>/dev/null; then echo "$$v-dev+$$c.dirty"; \
    elif git describe --tags --exact-match --match "v$$v" >/dev/null 2>&1; then echo "$$v"; \
    else echo "$$v-dev+$$c"; fi; \
  else echo "$$v"; fi)
endif
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/sandbox-executor
# Where make run listens: loopback only, as a development agent runs
# commands as you on your machine.
ADDR       ?= 127.0.0.1:3030
PROXY_ADDR ?= 127.0.0.1:3031
# := so the secret is drawn once: a plain ?= would draw a new one at every use.
ifndef DEV_SECRET
DEV_SECRET := dev-$(shell head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
endif

# Release binaries: one static binary per platform, and their checksums.
DIST      ?= dist
PLATFORMS := linux/amd64 linux/arm64

# The image. A tag cannot hold "+", so 0.1.0-dev+abc is tagged 0.1.0-dev-abc.
DOCKER       ?= docker
IMAGE_REPO   ?= sandbox-executor
IMAGE        ?= $(IMAGE_REPO):$(subst +,-,$(VERSION))
PLATFORM     ?=
DOCKER_FLAGS ?=

# Fuzz targets, as package:Target. `make test` runs each for FUZZ_SMOKE;
# `make fuzz` for FUZZTIME each (e.g. make fuzz FUZZTIME=5m). The smoke is
# a count of runs, not a duration: Go 1.26's fuzzing coordinator can fail
# a target with "context deadline exceeded" when a duration ends while a
# worker is busy (go.dev/issue/75804, fixed in Go 1.27), as it did once in
# CI on 2 loaded vCPUs; a count has no deadline to race. 1000 runs take
# 0.05-6 s a target here (165 to 21,000 runs/s).
FUZZ_TARGETS := server:FuzzDecode server:FuzzLastEventID sse:FuzzJSONStringPieces \
	sse:FuzzReader sse:FuzzAppendJSONString \
	internal/eventjson:FuzzDecode internal/wsclient:FuzzParseHeader files:FuzzResolve files:FuzzExtract
FUZZTIME     ?= 1m
FUZZ_SMOKE   ?= 1000x

.PHONY: build run version release docker test test-go test-clients test-release test-manifests \
	test-image fuzz bench clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandbox-executor

version:
	@echo $(VERSION)

# make run ADDR=127.0.0.1:3040 PROXY_ADDR=127.0.0.1:3041 when 3030 or 3031
# is taken (another agent, another make run).
run: build
	@echo "sandbox-executor $(VERSION): API on http://$(ADDR), TCP proxy on $(PROXY_ADDR)"
	@echo "development secret: $(DEV_SECRET)"
	@echo "try: curl -s -H 'Authorization: Bearer $(DEV_SECRET)' -d '{\"cmd\":\"uname -a\"}' http://$(ADDR)/run"
	@SANDBOX_SECRET=$(DEV_SECRET) LOG_LEVEL=$${LOG_LEVEL:-debug} LOG_FORMAT=$${LOG_FORMAT:-console} \
		$(BIN) -addr $(ADDR) -proxy-addr $(PROXY_ADDR) || { rc=$$?; \
		echo "make run: the agent on $(ADDR) and $(PROXY_ADDR) exited with code $$rc (its error is above); if a port is taken, choose others: make run ADDR=127.0.0.1:3040 PROXY_ADDR=127.0.0.1:3041" >&2; \
		exit $$rc; }

# $(DIST)/sandbox-executor-linux-{amd64,arm64} and $(DIST)/SHA256SUMS
# (check with: cd dist && sha256sum -c SHA256SUMS).
release:
	@mkdir -p $(DIST)
	@rm -f $(DIST)/sandbox-executor-* $(DIST)/SHA256SUMS
	@set -e; for p in $(PLATFORMS); do \
		out=$(DIST)/sandbox-executor-$${p%/*}-$${p#*/}; \
		echo "$$out ($(VERSION))"; \
		CGO_ENABLED=0 GOOS=$${p%/*} GOARCH=$${p#*/} $(GO) build -trimpath -ldflags '$(LDFLAGS)' \
			-o $$out ./cmd/sandbox-executor; \
	done
	cd $(DIST) && sha256sum sandbox-executor-* >SHA256SUMS

# The agent's image (see Dockerfile), for PLATFORM if set (linux/arm64),
# also tagged $(IMAGE_REPO):latest.
docker:
	DOCKER_BUILDKIT=1 $(DOCKER) build $(DOCKER_FLAGS) $(if $(PLATFORM),--platform $(PLATFORM)) \
		--build-arg VERSION=$(VERSION) -t $(IMAGE) -t $(IMAGE_REPO):latest .

test: test-go test-clients test-release test-manifests test-image

test-go:
	@[ "$$(uname -s)" = Linux ] || { echo "make test needs Linux: the agent is Linux-only (process groups, /proc, PID 1)"; exit 1; }
	@command -v "$$($(GO) env CC)" >/dev/null || \
		{ echo "make test-go: go test -race needs a C compiler, $$($(GO) env CC) (Debian: apt-get install gcc)"; exit 1; }
	@# search/ runs every grep on Go's engine and on rg's and compares the replies.
	@command -v rg >/dev/null || { [ "$$(id -u)" = 0 ] && { DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends ripgrep >/dev/null 2>&1 || \
		{ timeout 300 apt-get update -qq && DEBIAN_FRONTEND=noninteractive timeout 600 apt-get install -y -qq --no-install-recommends ripgrep; }; }; } || \
		echo "make test-go: rg is missing (Debian: apt-get install ripgrep): search/ tests only its Go engine"
	$(GO) mod tidy -diff
	$(GO) vet ./...
	@# staticcheck's bug checks and unused code, which go vet does not look for;
	@# go run builds it from the module proxy, at a pinned version, without go.mod.
	$(GO) run $(STATICCHECK) -checks 'SA*,U1000' ./...
# The code contexts' chart test needs matplotlib for Debian's python3
# (server/contexts_display_test.go); elsewhere it skips, saying so.
	@[ ! -x /usr/bin/python3 ] || /usr/bin/python3 -c 'import matplotlib' 2>/dev/null || [ "$$(id -u)" -ne 0 ] || \
		apt_who=make bash -c 'LIB_APT_ONLY=1 . tests/clients/lib.sh && apt_install python3-matplotlib'
	$(GO) test -race -count=1 -timeout 10m ./...
	@$(MAKE) --no-print-directory fuzz FUZZTIME=$(FUZZ_SMOKE)

# One target at a time: go test -fuzz takes one target and one package.
fuzz:
	@for t in $(FUZZ_TARGETS); do \
		echo "fuzz $$t for $(FUZZTIME)"; \
		$(GO) test -run '^$$' -fuzz "^$${t#*:}$$" -fuzztime $(FUZZTIME) ./$${t%%:*} || exit 1; \
	done

# Real clients (curl -N, Python requests, Node fetch and the npm eventsource
# package) against the built binary; installs what it needs.
test-clients: build
	./tests/clients/run.sh $(BIN)

# The release binaries: the sums verify, each is a static ELF of its
# architecture, stamped with the version.
test-release: release
	./tests/release/check.sh $(DIST) $(VERSION)

# The Kubernetes manifests, decoded strictly into the API's Go types by a
# module of their own (deploy/kubernetes/validate), and that module's tests.
test-manifests:
	cd deploy/kubernetes/validate && $(GO) mod tidy -diff && $(GO) vet ./... && $(GO) test -count=1 ./... && \
		$(GO) run . -agent-version $$(cat ../../../VERSION) ..

# The image, the three ways of baking the agent into another image, and the
# agent as PID 1 in a container, under a dockerd of its own; installs
# docker.io and busybox-static when missing, skips where dockerd cannot run.
test-image: build
	VERSION=$(VERSION) ./tests/image/run.sh $(BIN)

bench: build
	$(GO) run ./cmd/sandbox-bench -bin $(BIN)

clean:
	rm -rf bin $(DIST)
