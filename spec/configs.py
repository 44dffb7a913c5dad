"""Configurations: the bounds and roles of each model to explore, kept apart from the spec (like a
TLA+ .cfg file). ``STANDARD`` is what ``make verify`` explores; ``medium`` and ``large`` are for
benchmarks; every hazard has a configuration of its own where exploration must exhibit it.
"""
from __future__ import annotations

from dataclasses import dataclass, field, replace

from .budgets import BUDGETS
from .frames import DEFAULT_EXCHANGE, FANOUT_EXCHANGE, MISSING_EXCHANGE
from .properties import ALWAYS
from .roles import QueueSpec, Role


class ConfigError(ValueError):
    """A configuration name, bound or value that cannot be used; the message is one line."""


# Bounds a user may change from the command line, with their allowed ranges: the budgets (spec.budgets)
# and the state cap.
BOUNDS: dict[str, tuple[int, int]] = {**{b.name: (0, b.most) for b in BUDGETS}, "max_states": (1, 100_000_000)}


def _with_budgets(cls: type) -> type:
    """Give the class an int field per budget of spec.budgets, with its default (declared there, once)."""
    for budget in BUDGETS:
        cls.__annotations__[budget.name] = "int"
        setattr(cls, budget.name, budget.default)
    return cls


@dataclass(frozen=True)
@_with_budgets
class Config:
    """One bounded model: connections, channels per connection, queues, what each channel does, and a
    field per budget (``messages``, ``requeues``, ``crashes``, ...: spec.budgets)."""

    name: str
    description: str
    connections: int = 1
    channels: int = 1
    queues: tuple[QueueSpec, ...] = (QueueSpec(),)
    bindings: tuple[int, ...] = ()
    roles: dict = field(default_factory=dict)          # (conn, ch) -> Role
    channels_open: bool = True                          # False: channels start closed; clients open them
    deadlock_is_error: bool = True
    properties: tuple[str, ...] = ()                    # () means every property in the registry
    max_states: int = 5_000_000
    category: str = "small"

    def override(self, changes: dict) -> "Config":
        """This configuration with some bounds changed; unknown bounds and values out of range are refused."""
        values = {}
        for name, raw in changes.items():
            if name not in BOUNDS:
                raise ConfigError(f"unknown bound {name!r} (known: {', '.join(sorted(BOUNDS))})")
            try:
                value = int(raw)
            except (TypeError, ValueError):
                raise ConfigError(f"bound {name} must be a whole number, not {raw!r}") from None
            low, high = BOUNDS[name]
            if not low <= value <= high:
                raise ConfigError(f"bound {name}={value} is out of range ({low} to {high})")
            values[name] = value
        return replace(self, **values)


Q0, Q1, Q2 = 0, 1, 2
TO_Q0 = ((DEFAULT_EXCHANGE, Q0),)
NOWHERE = ((DEFAULT_EXCHANGE, 7),)          # a routing key no queue has: unroutable (RT-3)
# One role on two connections: the configuration is symmetric under swapping them (spec.symmetry).
TWIN = Role(consume=((Q0, False),), ack=True, multiple=True, reject=(True,), close=True)

_configs = [
    Config("ack_basics", "one publisher, one manual consumer acking, nacking and rejecting with multiple",
           channels=2, messages=2, requeues=2, bad=1,
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), ack=True, multiple=True, ack_all=True,
                               nack=(True, False), reject=(True,), bad_ack=True)}),
    Config("auto_ack", "automatic-mode consumer and gets; the connection can be lost",
           connections=2, messages=2, reconnects=1, losses=1, gets=2, bad=1,
           roles={(0, 1): Role(publish=TO_Q0),
                  (1, 1): Role(consume=((Q0, True),), get=((Q0, True), (Q0, False)), ack=True,
                               recover=(False,))}),
    Config("prefetch", "a global and a per-consumer prefetch, changed while deliveries are in flight",
           channels=2, messages=3, qos=2,
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), ack=True, multiple=True,
                               qos=((1, True), (2, True), (1, False)))}),
    Config("requeue_order", "two consumers on one queue requeueing, recovering and closing their channel",
           connections=2, messages=2, requeues=2, closes=1,
           roles={(0, 1): Role(publish=TO_Q0, consume=((Q0, False),), ack=True),
                  (1, 1): Role(consume=((Q0, False),), nack=(True,), recover=(True,), close=True)}),
    Config("confirms", "confirm mode: transient and persistent messages to a durable queue, mandatory returns",
           messages=3, queues=(QueueSpec(durable=True),),
           roles={(0, 1): Role(publish=TO_Q0 + NOWHERE, persistent=(False, True), mandatory=(True,),
                               confirm=True)}),
    Config("confirm_failures", "confirm mode with queue failures (nack) and a missing exchange",
           channels=2, messages=3, failures=1, bad=1,
           roles={(0, 1): Role(publish=TO_Q0, confirm=True),
                  (0, 2): Role(publish=((MISSING_EXCHANGE, Q0),) + TO_Q0, confirm=True, mode_errors=True)}),
    Config("tx_publish", "transactional publishes: held back, committed to a durable queue, rolled back, returned",
           channels=2, messages=2, requeues=1, queues=(QueueSpec(durable=True),),
           roles={(0, 1): Role(publish=TO_Q0 + NOWHERE, mandatory=(True,), persistent=(True,), tx=True),
                  (0, 2): Role(consume=((Q0, True),))}),
    Config("tx_ack", "transactional acknowledgements: held back, committed, rolled back and settled again",
           channels=2, messages=2, requeues=1,
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), ack=True, reject=(False,), multiple=True, tx=True)}),
    Config("crash", "persistent messages, confirms and acks across a broker crash",
           channels=2, messages=2, crashes=1, queues=(QueueSpec(durable=True),),
           roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), confirm=True),
                  (0, 2): Role(consume=((Q0, False),), ack=True)}),
    Config("routing", "fanout to two queues, dead-lettering, an exclusive queue of another connection",
           connections=2, messages=2, bad=1,
           queues=(QueueSpec(dead_letter=Q2), QueueSpec(exclusive=True, declared=False), QueueSpec()),
           bindings=(Q0,),
           roles={(0, 1): Role(publish=((FANOUT_EXCHANGE, 0),), declare=(Q1,), bind=(Q1,)),
                  (1, 1): Role(consume=((Q0, False), (Q1, False)), reject=(False,), ack=True)}),
    Config("twin_consumers", "two connections consume one queue in the same role: a symmetric configuration",
           connections=3, messages=2, requeues=1, closes=1,
           roles={(0, 1): Role(publish=TO_Q0), (1, 1): TWIN, (2, 1): TWIN}),
    Config("channel_error", "the broker closes a consumer's channel with an error: acks in flight are ignored",
           channels=2, messages=2, channel_errors=1,
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), ack=True, multiple=True)}),
    # Hazards: each of these must be exhibited (DESIGN.md, "hazards").
    Config("queue_admin", "purge and delete (if-unused, if-empty) of a queue another connection consumes",
           connections=2, channels=2, messages=2, admin=2, requeues=1,
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), reject=(True,)),
                  (1, 1): Role(purge=(Q0,), delete=((Q0, True, False), (Q0, False, False)), declare=(Q0,))}),
    Config("global_prefetch", "a global limit over basic.get deliveries and an automatic-mode consumer",
           channels=2, messages=2, qos=2, gets=1, queues=(QueueSpec(), QueueSpec()),
           roles={(0, 1): Role(publish=((DEFAULT_EXCHANGE, Q0), (DEFAULT_EXCHANGE, Q1))),
                  (0, 2): Role(get=((Q0, False),), qos=((1, True), (0, False)),
                               consume=((Q1, False), (Q0, True)), ack=True)}),
    Config("protocol_errors", "frames refused with a connection error, exclusive consumers, concurrent channels",
           connections=2, channels=2, messages=2, bad=1, reconnects=1,
           roles={(0, 1): Role(publish=TO_Q0, protocol_errors=True, consume=((Q0, False),), ack=True),
                  (0, 2): Role(get=((Q0, True),)),
                  (1, 1): Role(consume=((Q0, False),), exclusive=True, ack=True)}, gets=1),
    Config("hazard_auto_ack_loss", "AM-2: an automatic-mode delivery is lost with its connection",
           connections=2, messages=1, reconnects=1, losses=1, category="hazard",
           properties=("auto_ack_never_loses",),
           roles={(0, 1): Role(publish=TO_Q0), (1, 1): Role(consume=((Q0, True),))}),
    Config("hazard_late_detection", "RQ-3: a consumer's client vanishes, connects again and is served the "
                                    "messages behind its held one first",
           connections=2, messages=2, reconnects=1, vanishes=1, category="hazard",
           properties=("consumer_sees_publication_order",),
           roles={(0, 1): Role(publish=TO_Q0), (1, 1): Role(consume=((Q0, False),), ack=True)}),
    Config("hazard_unconfirmed_lost", "PC-10: a persistent message not yet confirmed is lost in a crash",
           messages=1, crashes=1, queues=(QueueSpec(durable=True),), category="hazard",
           properties=("persistent_never_lost", "confirmed_survives_crash"),
           roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), confirm=True)}),
    Config("hazard_ack_resurrected", "TX-8: an acknowledged message comes back after a crash",
           channels=2, messages=1, crashes=1, queues=(QueueSpec(durable=True),), category="hazard",
           properties=("acked_never_redelivered",),
           roles={(0, 1): Role(publish=TO_Q0, persistent=(True,)),
                  (0, 2): Role(consume=((Q0, False),), ack=True)}),
    Config("hazard_consumer_order", "RQ-3: with two consumers one sees messages out of publication order",
           connections=2, messages=2, requeues=1, category="hazard",
           properties=("consumer_sees_publication_order", "queue_in_publication_order"),
           roles={(0, 1): Role(publish=TO_Q0, consume=((Q0, False),), ack=True),
                  (1, 1): Role(consume=((Q0, False),), reject=(True,))}),
    Config("hazard_resume_before_requeue", "RQ-1, PF-2: one consumer under a channel-wide limit that requeues "
           "sees messages out of publication order (its limiter's resume overtakes the requeue)",
           channels=2, messages=2, requeues=1, qos=1, category="hazard",
           properties=("consumer_sees_publication_order", "queue_in_publication_order"),
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), qos=((1, True),), qos_first=True, ack=True,
                               nack=(True,))}),
    Config("hazard_tx_not_atomic", "TX-9: a crash during tx.commit leaves part of the transaction",
           messages=2, crashes=1, queues=(QueueSpec(durable=True),), category="hazard",
           properties=("tx_commit_atomic",),
           roles={(0, 1): Role(publish=TO_Q0, persistent=(True,), tx=True)}),
    Config("hazard_confirm_order", "PC-7: confirms arrive in another order than the publishes",
           messages=2, queues=(QueueSpec(durable=True),), category="hazard",
           properties=("confirms_in_publish_order",),
           roles={(0, 1): Role(publish=TO_Q0, persistent=(True, False), confirm=True)}),
    Config("hazard_prefetch_exceeded", "PF-5: lowering the prefetch leaves more outstanding than the new bound",
           channels=2, messages=2, qos=2, category="hazard",
           properties=("outstanding_within_prefetch", "prefetch_respected"),
           roles={(0, 1): Role(publish=TO_Q0),
                  (0, 2): Role(consume=((Q0, False),), qos=((2, True), (1, True)))}),
]

# What each configuration must exhibit besides holding every invariant: its reachability properties
# (guarding the invariants against vacuity) and the hazards it shows.
EXPECT: dict[str, tuple[str, ...]] = {
    "ack_basics": ("requeued_in_place", "redelivery_seen", "multiple_ack_settles_several", "requeued_twice",
                   "channel_close_requeues", "unknown_tag_refused", "consumer_sees_publication_order"),
    "auto_ack": ("auto_ack_never_loses", "requeued_in_place", "redelivery_seen", "channel_close_requeues",
                 "get_empty", "auto_delivered", "recover_without_requeue_refused"),
    "prefetch": ("outstanding_within_prefetch", "multiple_ack_settles_several", "prefetch_full"),
    "requeue_order": ("consumer_sees_publication_order", "requeued_in_place", "redelivery_seen",
                      "requeued_twice", "channel_close_requeues"),
    "confirms": ("confirms_in_publish_order", "confirm_multiple", "return_before_ack"),
    "confirm_failures": ("confirm_multiple", "publish_nacked", "missing_exchange_refused",
                         "mode_switch_refused", "not_transactional_refused"),
    "tx_publish": ("commit_published", "commit_returned", "commit_pending_refused"),
    "tx_ack": ("multiple_ack_settles_several", "commit_applied_acks", "rollback_kept_outstanding"),
    "crash": ("persistent_never_lost", "acked_never_redelivered", "recovered_after_crash", "confirm_multiple"),
    "routing": ("exclusive_queue_locked", "dead_lettered", "fanout_copies", "requeued_in_place"),
    "twin_consumers": ("consumer_sees_publication_order", "requeued_in_place", "redelivery_seen",
                       "multiple_ack_settles_several", "requeued_twice", "channel_close_requeues"),
    "channel_error": ("channel_close_requeues", "redelivery_seen", "multiple_ack_settles_several"),
    "queue_admin": ("queue_purged", "deleted_queue_cancels_consumer", "delete_refused", "requeued_in_place"),
    "global_prefetch": ("global_limit_counts_gets", "auto_delivered", "get_empty"),
    "protocol_errors": ("protocol_error_closes_connection", "exclusive_consumer_refused", "auto_delivered"),
    "hazard_auto_ack_loss": ("auto_ack_never_loses",),
    "hazard_late_detection": ("consumer_sees_publication_order",),
    "hazard_unconfirmed_lost": ("persistent_never_lost",),
    "hazard_ack_resurrected": ("acked_never_redelivered",),
    "hazard_consumer_order": ("consumer_sees_publication_order",),
    "hazard_resume_before_requeue": ("consumer_sees_publication_order",),
    "hazard_tx_not_atomic": ("tx_commit_atomic",),
    "hazard_confirm_order": ("confirms_in_publish_order",),
    "hazard_prefetch_exceeded": ("outstanding_within_prefetch",),
}
_configs = [replace(c, properties=ALWAYS + EXPECT[c.name]) for c in _configs]

# For benchmarks (and, for medium, verification): the same roles with more messages.
_configs.append(replace(_configs[0], name="medium", messages=3, category="medium",
                        description="ack_basics with three messages (at least 100,000 states)",
                        properties=ALWAYS + EXPECT["ack_basics"]))
_configs.append(replace(_configs[0], name="large", messages=4, requeues=1, category="large",
                        description="ack_basics with four messages and one requeue (at least 1,000,000 states; "
                                    "benchmarks only)",
                        properties=ALWAYS + EXPECT["ack_basics"]))

CONFIGS: dict[str, Config] = {c.name: c for c in _configs}
STANDARD: tuple[str, ...] = tuple(c.name for c in _configs if c.category != "large")


def get(name: str) -> Config:
    """The configuration called ``name``; an unknown name is a ConfigError naming the known ones."""
    try:
        return CONFIGS[name]
    except KeyError:
        raise ConfigError(f"unknown configuration {name!r} (known: {', '.join(CONFIGS)})") from None
