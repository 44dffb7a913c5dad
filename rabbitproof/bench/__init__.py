"""Benchmarks (`rabbitproof bench`, ``make bench``): explorer throughput, reductions against full
searches, the trace checker, the broker against RabbitMQ, and the conformance suite's steps per second.
Figures go to docs/results.md, never into tests as timed assertions."""
