# rabbitproof: every target sets up what it needs (a private virtual environment in .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: setup verify test explore broker bench rabbitmq clean conformance

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e .
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)

## verify: explore every standard configuration, check every invariant, find every hazard.
verify: $(STAMP)
	$(PY) -m spark_check.verify

## test: the test suite (spec rules, trace checker, explorer, broker interop, crash and bad-input tests).
## Some tests run against a real RabbitMQ 3.10.8, installed here when missing.
test: $(STAMP) rabbitmq
	$(PY) -m pytest -q

## explore: explore one configuration (CONFIG=name, ENGINE=local|spark, ARGS=extra flags).
CONFIG ?= small
ENGINE ?= local
explore: $(STAMP)
	$(PY) -m spark_check explore $(CONFIG) --engine $(ENGINE) $(ARGS)

## broker: run the reference broker on 127.0.0.1:5672.
broker: $(STAMP)
	$(PY) -m impl.server $(ARGS)

## bench: explorer throughput; trace checker time on long spec-made and RabbitMQ-recorded traces; broker throughput.
bench: $(STAMP) rabbitmq
	$(PY) -m spark_check.bench
	$(PY) -m spark_check.trace_bench
	$(PY) -m tests.bench.recorded_trace_bench --messages 250
	$(PY) -m tests.bench.broker_bench

## conformance: generated programs against any AMQP 0-9-1 broker, judged by the spec (URL=amqp://user:pass@host:port/vhost).
PROGRAMS ?= 100
conformance: $(STAMP)
	@test -n "$(URL)" || (echo "make conformance: give the broker's URL: make conformance URL=amqp://user:pass@host:port/vhost" >&2; exit 2)
	$(PY) -m tests.conformance --url "$(URL)" --programs $(PROGRAMS) $(ARGS)

## rabbitmq: install the reference RabbitMQ 3.10.8 (Debian's rabbitmq-server) if it is missing.
rabbitmq:
	@test -x /usr/lib/rabbitmq/bin/rabbitmq-server || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server)

clean:
	rm -rf $(VENV) out .pytest_cache .hypothesis
