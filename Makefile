# The two commands a newcomer runs: `make run` and `make test`.
SHELL := /bin/bash
NODE_MODULES_STAMP := node_modules/.package-lock.json
NATIVE_STAMP := node_modules/.native-stamp

BUILD_STAMP := dist/.build-stamp
SOURCES := $(shell find src -name '*.ts' ! -name '*.test.ts')
# `make run` publishes examples/hello here; Slipway clones `examples/hello` from it.
EXAMPLE_GIT_ROOT := $(CURDIR)/data/git
SLIPWAY_GIT_BASE_URL ?= file://$(EXAMPLE_GIT_ROOT)
# The quick start's wallets are topped up through the payments sandbox (free credit, docs/billing.md#sandbox);
# `SLIPWAY_PAYMENTS=off make run` keeps it off.
SLIPWAY_PAYMENTS ?= sandbox
# What `make run` needs besides Docker (scripts/ensure-docker.sh): command:Debian package.
RUN_NEEDS := git:git nginx:nginx-light

.PHONY: run run-system build install native test test-services typecheck lint clean bench-router

# The packages without their install scripts (about 20 s), then the scripts apart (`native`): better-sqlite3's
# compile of SQLite takes over a minute of one core, which `make test` runs beside the build and the checks
# (they need no native code) instead of before them.
$(NODE_MODULES_STAMP): package-lock.json package.json
	npm ci --no-audit --no-fund --ignore-scripts
	@touch $(NODE_MODULES_STAMP)

# -O2, as SQLite's own build (./configure) compiles it: better-sqlite3 asks for -O3, which takes 95 s of one
# core here against 71 s (the last -O on gcc's command line wins).
$(NATIVE_STAMP): $(NODE_MODULES_STAMP)
	CFLAGS=-O2 CXXFLAGS=-O2 npm rebuild --no-audit --no-fund
	@touch $(NATIVE_STAMP)

install: $(NODE_MODULES_STAMP)

## The packages' install scripts: the native addons (better-sqlite3) that running Slipway and its tests need.
native: $(NATIVE_STAMP)

build: install
	node scripts/build.mjs
	@chmod +x bin/slipway
	@touch $(BUILD_STAMP)

# `make run` compiles only when a source, a tsconfig or the dependencies changed.
$(BUILD_STAMP): $(NODE_MODULES_STAMP) tsconfig.json tsconfig.build.json scripts/build.mjs $(SOURCES)
	node scripts/build.mjs
	@chmod +x bin/slipway
	@touch $(BUILD_STAMP)

## Start Slipway on the embedded default (SQLite in ./data, local Docker, nginx router) with examples/hello
## published for the README's quick start, and the payments sandbox on (free credit: never for paying tenants);
## prints the bootstrap key on first start.
run: run-system $(BUILD_STAMP) $(NATIVE_STAMP)
	@bash scripts/ensure-example-image.sh
	@# the database images for hosts without a registry: in the background, so that the first start stays quick
	@mkdir -p data && (setsid bash scripts/ensure-db-images.sh > data/db-images.log 2>&1 &) && echo "make run: database images: scripts/ensure-db-images.sh in the background (log: data/db-images.log)" >&2
	@bash scripts/prepare-example.sh "$(EXAMPLE_GIT_ROOT)"
	@[ "$(SLIPWAY_PAYMENTS)" != sandbox ] || echo "make run: --payments sandbox: top-ups are credited at once WITHOUT ANY PAYMENT (for the quick start; SLIPWAY_PAYMENTS=off make run keeps it off)" >&2
	./bin/slipway serve --git-base-url "$(SLIPWAY_GIT_BASE_URL)" --payments "$(SLIPWAY_PAYMENTS)"

# git and nginx (installed with apt-get as root on Debian/Ubuntu, else what to install is printed),
# then a Docker Engine that answers (scripts/ensure-docker.sh installs and starts it the same way).
run-system:
	@missing=(); \
	for need in $(RUN_NEEDS); do \
	  cmd=$${need%%:*}; command -v "$$cmd" >/dev/null 2>&1 || [ -x "/usr/sbin/$$cmd" ] || missing+=("$${need#*:}"); \
	done; \
	if [ $${#missing[@]} -gt 0 ]; then \
	  if [ "$$(id -u)" -ne 0 ] || ! command -v apt-get >/dev/null 2>&1; then \
	    echo "make run: missing $${missing[*]}: install them (Debian/Ubuntu: sudo apt-get install $${missing[*]}) and run again." >&2; exit 1; \
	  fi; \
	  echo "make run: installing $${missing[*]} with apt-get" >&2; \
	  export DEBIAN_FRONTEND=noninteractive; \
	  apt-get update -qq >&2 && apt-get install -y -qq --no-install-recommends "$${missing[@]}" >&2; \
	fi
	@bash scripts/ensure-docker.sh

typecheck: install
	npx tsc -p tsconfig.json --noEmit

lint: install
	npx eslint .

## Install what the tests need, type-check, lint and run the whole suite (the three tiers, docs/testing.md);
## ends with "N passed, N failed".
## The test services are prepared while npm installs (they wait on apt, PostgreSQL and Docker rather than on
## the CPU, and need no node_modules); then the native addons' compile (one core), the TypeScript compile, the
## type check and the lint side by side (-j4).
test:
	@$(MAKE) --no-print-directory -j4 --output-sync=target install test-services
	@$(MAKE) --no-print-directory -j4 --output-sync=target native build typecheck lint
	@set -a && . ./.test-env && set +a && node scripts/run-tests.mjs

# One after the other: each may run apt-get, which takes the dpkg lock.
test-services:
	@bash scripts/ensure-system.sh
	@url=$$(bash scripts/ensure-postgres.sh) && echo "SLIPWAY_TEST_PG_URL=$$url" > .test-env
	@bash scripts/ensure-shared-servers.sh >> .test-env
	@bash scripts/ensure-docker.sh
	@bash scripts/ensure-db-images.sh

.PHONY: db-images

## Locally built images of the database servers (slipway-local/postgresql, mysql, redis) for hosts that reach
## no registry: debootstrap from Debian's mirror + docker import, rebuilt only when scripts/ensure-db-images.sh changed.
db-images:
	@bash scripts/ensure-db-images.sh

## Router throughput and latency (wrk): direct, plain nginx, the nginx driver, the Node driver, plain http-proxy-3.
bench-router: build native
	@bash scripts/ensure-system.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	npx tsx bench/router.bench.ts

.PHONY: bench-all bench-deploy bench-memory bench-api bench-writes bench-log-ingest bench-log-query bench-log-live bench-databases bench-backups bench-metering bench-monitoring

## The whole platform's goals in one run (issue 28): deploy latency, memory with everything on (with the status,
## health and metrics reads' p99), the API's hot path and the sampler's writes over 2,000 resources; then each
## figure beside its goal (bench/summary.ts, the README's performance table). About 15 minutes.
bench-all: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	@bash scripts/ensure-db-images.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	npx tsx bench/deploy.bench.ts --iterations 7
	npx tsx bench/idle-memory.bench.ts --idle 60
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/api.bench.ts --pg-url "$$url"
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/writes.bench.ts --pg-url "$$url"
	npx tsx bench/summary.ts

## One minute of the resource sampler's rows for 2,000 resources, batched vs one by one, on SQLite and PostgreSQL (goal: a pass <= 1 s).
bench-writes: build native
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/writes.bench.ts --pg-url "$$url"

## The API's authenticated hot path (wrk): `slipway serve` vs a minimal Fastify handler, on SQLite and PostgreSQL.
bench-api: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/api.bench.ts --pg-url "$$url"

## Deploy latency of a tiny app through the API vs plain docker build + docker run (ratio of medians, goal <= 1.2).
bench-deploy: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	npx tsx bench/deploy.bench.ts

## RSS of `slipway serve` with ten projects, three databases and ten monitors, in use and after a restart (goal <= 120 MiB),
## with the V8 heap, what holds it, and the p99 of the status, health and metrics reads (goal <= 20 ms); nginx reported separately.
bench-memory: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	@bash scripts/ensure-db-images.sh
	npx tsx bench/idle-memory.bench.ts

## Runtime logs through `slipway serve`, on SQLite and PostgreSQL (bench/logs.bench.ts): ingest from real containers
## (goal >= 50,000 lines/s SQLite, >= 20,000 PostgreSQL), newest 100 of 1,000,000 lines (p99 <= 20 ms), write -> WebSocket (p99 <= 100 ms).
bench-log-ingest bench-log-query bench-log-live: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/logs.bench.ts $(patsubst bench-log-%,%,$@) --pg-url "$$url"

clean:
	rm -rf dist test-results .test-env

## Time from POST …/databases to running for each local image, beside `docker run` of the same image until a login works.
bench-databases: build native
	@bash scripts/ensure-docker.sh
	@bash scripts/ensure-db-images.sh
	npx tsx bench/databases.bench.ts

## Backup and restore of 1 GiB of PostgreSQL rows through serve, beside pg_dump and pg_restore run by hand (goal: <= 1.2x each); the verification's time reported.
bench-backups: build native
	@bash scripts/ensure-docker.sh
	@bash scripts/ensure-db-images.sh
	npx tsx bench/backups.bench.ts

## One usage-metering pass over 1,000 running resources on SQLite and PostgreSQL, beside hand-written prepared statements (goal: <= 1 s on SQLite, <= 1 ledger row per workspace per hour).
bench-metering: build native
	@url=$$(bash scripts/ensure-postgres.sh) && npx tsx bench/metering.bench.ts --pg-url "$$url"

## Monitoring: 1,000 monitors at 10 s (p99 lateness <= 1 s), detection latency through serve (<= 12 s), the status view's p99 with 10 projects (<= 20 ms); each beside its reference.
bench-monitoring: build native
	@bash scripts/ensure-system.sh
	@bash scripts/ensure-docker.sh
	@command -v wrk >/dev/null || (DEBIAN_FRONTEND=noninteractive apt-get install -y -qq wrk)
	npx tsx bench/monitoring.bench.ts
