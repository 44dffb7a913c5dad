# rabbitproof: every target sets up what it needs (a private virtual environment in .venv).
PYTHON ?= python3
VENV   := .venv
BIN    := $(VENV)/bin
PY     := $(BIN)/python
STAMP  := $(VENV)/.installed-$(shell cksum < pyproject.toml | cut -d' ' -f1)

.PHONY: setup verify test explore broker bench rabbitmq java clean conformance check docs fast

$(STAMP): pyproject.toml
	@test -x $(PY) || $(PYTHON) -m venv $(VENV)
	$(PY) -m pip install -q --upgrade pip
	$(PY) -m pip install -q -e '.[spark,proofs,dev]'
	@rm -f $(VENV)/.installed-*
	@touch $@

setup: $(STAMP)

## fast: compile the hot modules of the spec and of check's search with mypyc into .build/fast
## (rabbitproof/compiled.py), an optional speed-up whose counts are the pure-Python code's. FAST=1 on explore,
## check and bench builds it when spec/ or rabbitproof/check/ changed and uses it (make verify checks the
## pure-Python spec: CrossHair reads its source).
FAST ?=
FAST_BUILD := .build/fast/built-from.json
$(FAST_BUILD): $(STAMP) $(wildcard spec/*.py) $(wildcard rabbitproof/check/*.py)
	RABBITPROOF_FAST= $(PY) -m rabbitproof.compiled
fast: $(FAST_BUILD)
ifeq ($(FAST),1)
export RABBITPROOF_FAST := 1
FAST_DEP := $(FAST_BUILD)
endif

## verify: explore every standard configuration, check the Z3 model against the spec, prove the
## invariants for every size, run CrossHair over the spec's contracts, hold `check`'s answers by argument and
## from smaller setups to the exhaustive search and to RabbitMQ's guide; one summary table. The parts run two
## at a time on two cores or more (ARGS=--jobs=1: one after another).
## PART=explore|agreement|proofs|bmc|crosshair|setups runs one part; ARGS=--update-manifest rewrites the pinned
## counts, ARGS=--random-setups=N holds N setups drawn at random to the search.
## Without PART it then runs the conformance suite against our broker with every planted divergence, alone and
## all at once (`make test` runs a few of them): each must be its own finding named by its rule.
PART ?=
verify: $(STAMP)
	$(BIN)/rabbitproof verify $(if $(PART),--part $(PART)) $(ARGS)
	$(if $(PART),,RABBITPROOF_ALL_DIVERGENCES=1 $(PY) -m pytest -q -p no:xdist -p no:cacheprovider tests/test_conformance_divergences.py)

## test: the test suite (spec rules, trace checker, explorer, broker interop, crash and bad-input tests).
## Some tests run against a real RabbitMQ 3.10.8, installed here when missing. JOBS=2 processes share the
## suite a file at a time (much of it waits on brokers, Spark and sockets); JOBS=0 runs it in this process.
JOBS ?= 2
test: $(STAMP) rabbitmq java
	$(PY) -m pytest -q $(if $(filter-out 0,$(JOBS)),-n $(JOBS) --dist loadfile,-p no:xdist)

## explore: explore one configuration (CONFIG=name, ENGINE=local|spark, MASTER=Spark master URL, REDUCE=por|none,
## ARGS=extra flags).
CONFIG ?= ack_basics
ENGINE ?= local
MASTER ?=
REDUCE ?= none
explore: $(STAMP) $(FAST_DEP) $(if $(filter spark,$(ENGINE)),java)
	$(BIN)/rabbitproof explore $(CONFIG) --engine $(ENGINE) $(if $(MASTER),--master $(MASTER)) --reduce $(REDUCE) $(ARGS)

## check: answer the five delivery questions for your setup file (FILE=examples/work-queue.toml,
## ENGINE=local|spark, ARGS=--json --chart DIR ...); exit code 0 all pass, 1 one can happen, 2 bad input,
## 3 undecided (docs/reference/cli.md).
FILE ?=
check: $(STAMP) $(FAST_DEP) $(if $(filter spark,$(ENGINE)),java)
	@test -n "$(FILE)" || (echo "make check: name the setup file: make check FILE=examples/work-queue.toml" >&2; exit 2)
	$(BIN)/rabbitproof check "$(FILE)" --engine $(ENGINE) $(if $(MASTER),--master $(MASTER)) $(ARGS)

## broker: run the reference broker on 127.0.0.1:5672.
broker: $(STAMP)
	$(BIN)/rabbitproof broker $(ARGS)

## bench: explorer throughput; full and reduced searches of every standard configuration (every verdict must be
## unchanged); trace checker time on long spec-made and RabbitMQ-recorded traces; broker throughput;
## conformance steps per second against the in-process core, the impl server and RabbitMQ; `rabbitproof check` on
## the two-publisher benchmark setup, each engine, 300 s at most a run; every example's "can happen" answers replayed on our broker
## and RabbitMQ with real crashes (ARGS=PART ... for one).
## Every target is a call of the one command, `rabbitproof SUBCOMMAND` (docs/reference/cli.md).
bench: $(STAMP) $(FAST_DEP) rabbitmq java
	$(BIN)/rabbitproof bench $(ARGS)

## conformance: generated programs against any AMQP 0-9-1 broker, judged by the spec (URL=amqp://user:pass@host:port/vhost).
PROGRAMS ?= 100
conformance: $(STAMP)
	@test -n "$(URL)" || (echo "make conformance: give the broker's URL: make conformance URL=amqp://user:pass@host:port/vhost" >&2; exit 2)
	$(BIN)/rabbitproof conformance "$(URL)" --programs $(PROGRAMS) $(ARGS)

## docs: rewrite the generated reference tables of docs/ (subcommands, configurations, properties, setup-file
## keys) from the code; tests/test_docs_reference.py fails until they match.
docs: $(STAMP)
	$(PY) -m rabbitproof.reference --write

## rabbitmq: install the reference RabbitMQ 3.10.8 (Debian's rabbitmq-server) if it is missing.
rabbitmq:
	@test -x /usr/lib/rabbitmq/bin/rabbitmq-server || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q rabbitmq-server)

## java: install Debian's JRE (the Spark engine runs on it) if java is missing.
java:
	@command -v java >/dev/null 2>&1 || (apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q default-jre-headless)

clean:
	rm -rf $(VENV) out .build .pytest_cache .hypothesis
