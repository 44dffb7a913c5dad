"""rabbitproof's reference broker: a sans-IO AMQP 0-9-1 core (impl.core), an asyncio server (impl.server)
and a SQLite store (impl.store). It never imports spec/: tests hold it to the specification."""
