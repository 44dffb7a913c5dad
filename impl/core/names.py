"""Server-generated names (queues declared with an empty name, consumers started without a tag)."""

from __future__ import annotations

import base64
import os


def random_name(prefix: str) -> str:
    """A server-generated name like RabbitMQ's: amq.gen-XXXXXXXXXXXXXXXXXXXXXX."""
    return prefix + base64.urlsafe_b64encode(os.urandom(16)).decode("ascii").rstrip("=")
