"""The sans-IO broker core: bytes or decoded frames in, bytes out, per connection; no sockets, no asyncio.

`Broker` holds the virtual host (exchanges, queues, bindings) and the batches of durable writes it asks
its owner to commit; `Connection` holds one client connection and its channels.
"""

from impl.core.broker import Broker, Batch
from impl.core.connection import Connection

__all__ = ["Broker", "Batch", "Connection"]
