"""rabbitproof, the product: the `rabbitproof` command (cli.py) and what it runs beside the design
card's folders: `check` (a user's setup file and its questions), `explore` (one configuration, reports
and charts, the manifest), `conformance` (any broker judged by the spec), `recording` (the raw client,
recorded scenarios, recording files), `brokers` (brokers under test: ours and a private RabbitMQ),
`bench` (the benchmarks) and `verify` (`make verify`)."""
