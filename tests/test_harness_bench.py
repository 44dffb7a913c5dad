"""The broker bench runs end to end on a small load and refuses bad options with a clear message."""

from __future__ import annotations

import pytest
from pamqp import commands
from rich.console import Console

from rabbitproof.bench import broker as broker_bench


def test_bench_runs_against_impl_and_rabbitmq():
    console = Console(record=True, width=100)
    code = broker_bench.main(["--messages", "3000", "--warmup", "500", "--size", "64",
                              "--targets", "impl,rabbitmq"], console)
    out = console.export_text()
    assert code == 0, out
    for needle in ("impl", "rabbitmq", "transient", "persistent", "impl / RabbitMQ 3.10.8",
                   "encode publishes", "parse deliveries"):
        assert needle in out


def test_the_generator_writes_frames_its_parser_reads_back():
    """The publish generator's bytes split back into one basic.publish per message, whole. How fast both go
    is the bench's to measure ("encode publishes", "parse deliveries" above), not a test's to assert."""
    encoder = broker_bench.PublishEncoder("bench-queue", 128, True, 131072)
    stream = bytearray(encoder.batch(1, 100))
    frames, used = broker_bench.split_frames(stream)
    assert used == len(stream)
    methods = [broker_bench.METHOD_INDEX.unpack_from(payload, 0)[0] for kind, _, payload in frames if kind == 1]
    assert methods == [commands.Basic.Publish.index] * 100


@pytest.mark.parametrize("argv, message", [
    (["--messages", "0"], "out of range"),
    (["--messages", "many"], "not an integer"),
    (["--size", "-1"], "out of range"),
    (["--targets", "impl,activemq"], "--targets: 'activemq' is not a target; choose from impl, rabbitmq"),
    (["--modes", ""], "--modes: '' is not a mode; choose from transient, persistent"),
    (["--prefetch", "10", "--ack-every", "50"], "exceeds --prefetch"),
    (["--window", "10", "--batch", "50"], "exceeds --window"),
])
def test_bad_options_are_refused_clearly(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        broker_bench.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
