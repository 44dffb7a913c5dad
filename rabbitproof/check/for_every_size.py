"""Which answers of `rabbitproof check` hold for every size, not only within the explored bounds.

`check` explores a setup exhaustively, within its bounds (the messages the file names, each fault at most
once): "cannot happen" is certain for those bounds. Where invariants that Z3 proves for any number of
connections, channels, messages, tags and requeues (proofs/, run by `make verify`) imply an answer for
every setup of a given shape, the report says so and names them. One such implication is known:

**Lost** cannot happen for any number of messages when every publisher uses confirms with persistent
messages, every queue is durable and shared (not exclusive) and dead-letters nowhere, every consumer
acknowledges manually and never drops a message (it acks, requeues, or closes its channel). The argument, over the spec's own
words:

1. the observer believes a message delivered at its basic.ack (confirms); the queue it was published to
   always exists (declared from the start, durable, shared, never deleted), so the message was routed
   and its queue took a copy (PC-4's unroutable case cannot arise);
2. ``copies_conserved`` (AM-2, ACK-1, ACK-6, RQ-4, DU-2, ER-3): every copy a queue took is live (ready,
   outstanding, held by a transaction, in flight in automatic mode), on disk while the broker is down,
   or gone for good with a recorded fate (``spec.state.FATE_NAMES``);
3. of those fates, such a setup reaches only "acknowledged" (a consumer acked it: processed) and "lost
   in a crash": automatic mode, dropping, dead-lettering (at most once in RabbitMQ: a dead-letter queue
   is excluded from PC-10, and the shape has none), purges, deletes and an exclusive queue's owner
   leaving are ruled out by the shape, and a refused queue nacks the publish, which is then never
   believed;
4. ``confirmed_survives_crash`` (PC-10, DU-2): no persistent message confirmed with basic.ack and routed
   to a durable queue is lost in a crash.

So a believed message is always live or processed, for any number of messages; the exploration checks
the same on this setup's bounds. The other questions have arguments of their own, for the shapes they
name (rabbitproof.check.by_argument); elsewhere a "cannot happen" holds within the bounds named in the
report.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rabbitproof.check.setup_file import Setup

DROPPING = ("nack-drop", "reject-drop")


@dataclass(frozen=True)
class ProvedFor:
    """An answer "cannot happen" implied for every size by ``invariants`` (names of model/invariants.py's
    proved invariants) for the setups ``covers`` accepts, described by ``shape``."""

    question: str
    invariants: tuple[str, ...]
    shape: str
    covers: Callable[[Setup], bool]


def confirmed_durable_manual(setup: Setup) -> bool:
    """Confirms with persistent messages, durable shared queues, manual acks, no message dropped."""
    return (all(p.confirms and p.persistent for p in setup.publishers)
            and all(q.durable and not q.exclusive and not q.dead_letter for q in setup.queues)
            and all(c.acks == "manual" and c.on_failure not in DROPPING for c in setup.consumers))


IMPLIED = (
    ProvedFor("lost", ("copies_conserved", "confirmed_survives_crash"),
              "every publisher confirms persistent messages, every queue is durable and shared with no "
              "dead-letter queue, every consumer acks manually and never drops a message", confirmed_durable_manual),
)


def proved_for(setup: Setup, question: str) -> ProvedFor | None:
    """The implication that makes ``question``'s "cannot happen" hold for every size in ``setup``, if any."""
    return next((p for p in IMPLIED if p.question == question and p.covers(setup)), None)
