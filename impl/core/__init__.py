"""The sans-IO broker core: bytes or decoded frames in, bytes out, per connection; no sockets, no asyncio.

`Broker` holds the virtual host (exchanges, queues, bindings) and the batches of durable writes it asks
its owner to commit; `Connection(broker)` is one client connection and its channels.

Modules, each calling only those below it (tests/impl/test_core_layers.py checks the imports):
connection -> channel -> broker -> exchanges -> queues -> journal, timers, limits, messages, ttl, ...
Upward, the lower modules reach their users only through interfaces they define and the upper ones
implement: `queues.Subscriber` (a consumer), `broker.Client` (a connection), `channel.Link` (a channel's
connection), and the callbacks a batch releases once on disk (`journal.Journal.after_commit`).
"""

from rabbitproof.impl.core.broker import Broker, Batch
from rabbitproof.impl.core.connection import Connection

__all__ = ["Broker", "Batch", "Connection"]
