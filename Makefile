# The two commands a newcomer runs: `make run` and `make test`.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.package-lock.json

.PHONY: run build install test typecheck lint clean bench-router

$(NODE_MODULES_STAMP): package-lock.json package.json
	npm ci --no-audit --no-fund
	@touch $(NODE_MODULES_STAMP)

install: $(NODE_MODULES_STAMP)

build: install
	npx tsc -p tsconfig.build.json
	@chmod +x bin/slipway

## Start Slipway on the embedded default (SQLite in ./data, local Docker); prints the bootstrap key on first start.
run: build
	./bin/slipway serve

typecheck: install
	npx tsc -p tsconfig.json --noEmit

lint: install
	npx eslint .

## Install what the tests need, type-check, lint and run the whole suite; ends with "N passed, N failed".
test: build typecheck lint
	@bash scripts/ensure-system.sh
	@url=$$(bash scripts/ensure-postgres.sh) && echo "SLIPWAY_TEST_PG_URL=$$url" > .test-env
	@bash scripts/ensure-docker.sh
	@set -a && . ./.test-env && set +a && node scripts/run-tests.mjs

## Router throughput and latency (wrk): direct, plain nginx, the nginx driver, the Node driver, plain http-proxy-3.
bench-router: build
	@bash scripts/ensure-system.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	npx tsx bench/router.bench.ts

clean:
	rm -rf dist test-results .test-env
