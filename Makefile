# sandbox-executor: `make run` starts the agent on loopback with a development
# secret it prints; `make test` runs everything CI runs.

GO        ?= go
VERSION   ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS   := -s -w -X main.version=$(VERSION)
BIN       := bin/sandbox-executor
# := so the secret is drawn once: a plain ?= would draw a new one at every use.
ifndef DEV_SECRET
DEV_SECRET := dev-$(shell head -c 12 /dev/urandom | od -An -tx1 | tr -d ' \n')
endif
IMAGE     ?= sandbox-executor:$(VERSION)

# Fuzz targets, as package:Target. `make test` runs each for FUZZ_SMOKE;
# `make fuzz` for FUZZTIME each (e.g. make fuzz FUZZTIME=5m).
FUZZ_TARGETS := server:FuzzDecode server:FuzzLastEventID sse:FuzzReader
FUZZTIME     ?= 1m
FUZZ_SMOKE   ?= 3s

.PHONY: build run test test-go test-clients fuzz bench docker clean

build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o $(BIN) ./cmd/sandbox-executor

run: build
	@echo "sandbox-executor $(VERSION): API on http://127.0.0.1:3030, TCP proxy on 127.0.0.1:3031"
	@echo "development secret: $(DEV_SECRET)"
	@echo "try: curl -s -H 'Authorization: Bearer $(DEV_SECRET)' -d '{\"cmd\":\"uname -a\"}' http://127.0.0.1:3030/run"
	SANDBOX_SECRET=$(DEV_SECRET) LOG_LEVEL=$${LOG_LEVEL:-debug} LOG_FORMAT=$${LOG_FORMAT:-console} $(BIN) -addr 127.0.0.1:3030 -proxy-addr 127.0.0.1:3031

test: test-go test-clients

test-go:
	$(GO) vet ./...
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

bench: build
	$(GO) run ./cmd/sandbox-bench -bin $(BIN)

docker:
	docker build -t $(IMAGE) .

clean:
	rm -rf bin
