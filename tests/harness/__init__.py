"""Test harness: brokers under test and the raw observer client.

- `rabbitmq.RabbitMQNode`: a private RabbitMQ 3.10.8 node (own directory, free loopback ports,
  guest/guest), started, stopped, SIGKILLed and restarted on demand.
- `impl_broker.ImplBroker`: our broker (`python -m impl.server`) with the same lifecycle.
- `brokers`: the interface both share and `make_broker(kind)`.
- `rawclient.RawConnection`: a raw AMQP 0-9-1 client on pamqp that sends exact frames and records
  every frame sent and received, in order (`trace`, or `command_log()` with content folded in).
- `ports`: free loopback ports.

Fixtures over these live in tests/conftest.py.
"""
