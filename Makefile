# Quick start: `make run` (install, build, start on 127.0.0.1:8080 in dev mode)
# and `make test` (the whole suite). `make bench` runs the benchmarks.
SWIFT ?= swift
LISTEN ?= 127.0.0.1:8080

.PHONY: deps test-deps build release run test unit integration bench clean embed

deps:
	@bash scripts/install-deps.sh

test-deps:
	@bash scripts/install-deps.sh --test

build: deps
	$(SWIFT) build

release: deps
	$(SWIFT) build -c release

run: release
	.build/release/relay serve --listen $(LISTEN)

test: test-deps
	$(SWIFT) build
	$(SWIFT) test
	RELAY_BIN=$(CURDIR)/.build/debug/relay python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration

unit:
	$(SWIFT) test

integration:
	RELAY_BIN=$(CURDIR)/.build/debug/relay python3 -m pytest -q -c Tests/integration/pytest.ini Tests/integration

bench: release
	bash Benchmarks/run.sh

# Regenerates Sources/RelayServer/DemoAssets.swift from demo/ and clients/js/ (the relay
# serves them at /demo); a test fails when the committed file is stale.
embed:
	python3 scripts/embed-demo.py

clean:
	rm -rf .build
