# Quick start: `make run` (install, build, start on 127.0.0.1:8080 in dev mode)
# and `make test` (the whole suite). `make bench` runs the benchmarks.
SWIFT ?= swift
LISTEN ?= 127.0.0.1:8080
# Release builds skip Swift's dynamic exclusivity checks (Package.swift, `hot`): a
# command-line flag, since SwiftPM refuses unsafeFlags in a versioned dependency.
RELEASE_FLAGS ?= -c release -Xswiftc -enforce-exclusivity=unchecked

.PHONY: deps test-deps build release run test unit integration bench bench-abuse bench-cluster bench-durable bench-durable-soak bench-push bench-tls bench-tls-floor fuzz fuzz-smoke asan tsan clean

deps:
	@bash scripts/install-deps.sh

test-deps:
	@bash scripts/install-deps.sh --test

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build $(RELEASE_FLAGS)

run: release
	.build/release/relay serve --listen $(LISTEN)

test: test-deps
	$(SWIFT) build
	$(SWIFT) test
	RELAY_BIN=$(CURDIR)/.build/debug/relay python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration

# The container image and the compose cluster, with podman (Tests/integration/test_containers.py,
# also run by `make test`): a release binary with the Swift runtime linked in
# (--static-swift-stdlib), a debootstrapped base image cached in .build/containers/.
.PHONY: test-containers
test-containers: test-deps
	$(SWIFT) build $(RELEASE_FLAGS) --static-swift-stdlib --product relay
	RELAY_IMAGE_BIN=$$($(SWIFT) build $(RELEASE_FLAGS) --static-swift-stdlib --show-bin-path)/relay \
	  python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration/test_containers.py Tests/integration/test_deploy_files.py

unit:
	$(SWIFT) test

integration:
	RELAY_BIN=$(CURDIR)/.build/debug/relay python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration

bench: release
	RELEASE_FLAGS="$(RELEASE_FLAGS)" bash Benchmarks/run.sh

# Attack figures (Benchmarks/results/abuse.md): slow reader, oversized identities, join
# churn, re-join pile-up, mass heartbeat death, a canary across a stall, ringing one user.
# Loopback, each attack bounded; about five minutes.
bench-abuse: release
	python3 Benchmarks/abuse.py

# Cluster figures (docs/cluster.md): needs redis-server (`make test-deps`).
bench-cluster: release
	$(SWIFT) build $(RELEASE_FLAGS) --product relay-bots
	python3 Benchmarks/cluster.py

# Durable single-node figures (Benchmarks/results/durable.md): throughput without a data
# dir and with each --fsync mode, disk bytes per record, restart-to-ready.
bench-durable: release
	$(SWIFT) build $(RELEASE_FLAGS) --product relay-bots
	python3 Benchmarks/durable.py

# A durable node under the soak scenario for an hour (Benchmarks/results/durable-soak.md):
# data dir size, RSS and snapshots over time, restart-to-ready at the end.
bench-durable-soak: release
	$(SWIFT) build $(RELEASE_FLAGS) --product relay-bots
	python3 Benchmarks/durable_soak.py

# Push figures (Benchmarks/results/push.md): ring → push on the wire, pushes/s to a local
# HTTP/2 sink (nghttpd, `make test-deps`), memory per registered device.
bench-push: release
	python3 Benchmarks/push.py

# TLS figures (docs/tls.md): wss against ws, idle memory, handshakes per second.
bench-tls: release
	$(SWIFT) build $(RELEASE_FLAGS) --product relay-bots
	python3 Benchmarks/tls.py

# What OpenSSL itself holds per idle server connection (Benchmarks/tls-floor/README.md).
bench-tls-floor:
	bash Benchmarks/tls-floor/run.sh

# The Swift tests and the integration suite under AddressSanitizer, and the Swift
# tests under ThreadSanitizer (the server has one thread; client code with an I/O
# thread is covered by the same command). Separate scratch paths: the sanitized
# builds never mix with the normal one. Low priority: the machine is shared.
ASAN_OPTIONS ?= detect_leaks=0:abort_on_error=1
asan: test-deps
	nice -n 19 $(SWIFT) build --build-tests --sanitize=address --scratch-path .build-asan
	ASAN_OPTIONS=$(ASAN_OPTIONS) nice -n 19 $(SWIFT) test --skip-build --sanitize=address --scratch-path .build-asan
	ASAN_OPTIONS=$(ASAN_OPTIONS) RELAY_SANITIZER=address RELAY_BIN=$(CURDIR)/.build-asan/debug/relay nice -n 19 python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration

tsan: test-deps
	nice -n 19 $(SWIFT) build --build-tests --sanitize=thread --scratch-path .build-tsan
	TSAN_OPTIONS=halt_on_error=1 nice -n 19 $(SWIFT) test --skip-build --sanitize=thread --scratch-path .build-tsan

# libFuzzer targets of Fuzz/ (nested package): FUZZ_SECONDS per target.
FUZZ_SECONDS ?= 600
fuzz:
	FUZZ_SECONDS=$(FUZZ_SECONDS) bash scripts/fuzz.sh

fuzz-smoke:
	FUZZ_SECONDS=5 bash scripts/fuzz.sh

clean:
	rm -rf .build
