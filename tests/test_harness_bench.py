"""The broker bench runs end to end on a small load and refuses bad options with a clear message."""

from __future__ import annotations

import pytest
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


def test_generator_is_far_faster_than_any_broker_needs():
    encode_rate, parse_rate = broker_bench.generator_capacity(20_000, 128, 100)
    print(f"\ngenerator alone: encodes {encode_rate:,.0f} publishes/s, parses {parse_rate:,.0f} deliveries/s")
    assert encode_rate > 500_000 and parse_rate > 200_000


@pytest.mark.parametrize("argv, message", [
    (["--messages", "0"], "out of range"),
    (["--messages", "many"], "not an integer"),
    (["--size", "-1"], "out of range"),
    (["--targets", "impl,activemq"], "--targets must be a comma-separated list of impl, rabbitmq"),
    (["--modes", ""], "--modes must be"),
    (["--prefetch", "10", "--ack-every", "50"], "exceeds --prefetch"),
    (["--window", "10", "--batch", "50"], "exceeds --window"),
])
def test_bad_options_are_refused_clearly(argv, message, capsys):
    with pytest.raises(SystemExit) as exited:
        broker_bench.parse_args(argv)
    assert exited.value.code == 2
    assert message in capsys.readouterr().err
