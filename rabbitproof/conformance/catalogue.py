"""The rule catalogue as the conformance suite reports on it: every rule ID of the semantics, a line saying
what a broker must do, and, for the rules no program the suite sends can show broken, why not.

Coverage is counted over this whole catalogue (coverage.py), not over the rules some spec action cites:
a rule is covered when a program written to show it (probes.py) or a generated program that exercises
its family was accepted; a rule listed in ``UNOBSERVABLE`` is reported with its reason instead.
"""
from __future__ import annotations

# Rule ID -> what a broker must do, in a broker author's words.
RULES = {
    "DT-1": "every delivery carries a delivery tag counting up from 1 on each channel, from each channel.open",
    "DT-2": "a redelivery of a message is a new delivery with a new tag",
    "DT-3": "delivery tags are 64-bit numbers",
    "AM-1": "the no-ack flag is chosen per basic.consume and per basic.get",
    "AM-2": "a no-ack delivery leaves the queue for good once sent",
    "AM-3": "a manual-mode delivery stays outstanding until the client settles it or the channel closes",
    "ACK-1": "basic.ack(tag) settles exactly that outstanding delivery",
    "ACK-2": "basic.ack(tag, multiple) settles every outstanding delivery with a tag up to it",
    "ACK-3": "basic.ack or basic.nack with tag 0 and multiple settles all outstanding deliveries",
    "ACK-4": "settling a tag that is not outstanding on the channel is a channel error, 406 PRECONDITION_FAILED",
    "ACK-5": "basic.reject settles one delivery; basic.nack can settle several",
    "ACK-6": "a negative settlement with requeue=true puts the message back; requeue=false drops it",
    "ACK-7": "acknowledging a delivery twice is a channel error (as ACK-4)",
    "PF-1": "prefetch_count n > 0 bounds the outstanding manual-mode deliveries; 0 means no bound",
    "PF-2": "basic.qos(global=false) bounds each consumer started after it; global=true the whole channel",
    "PF-3": "at the bound nothing more is delivered until a settlement frees room",
    "PF-4": "basic.get is not limited by the prefetch",
    "PF-5": "changing the bound never takes back a delivery",
    "RQ-1": "a queue keeps publication order; a requeued message goes back to its place",
    "RQ-2": "every delivery of a message delivered before carries redelivered=true, a first one false",
    "RQ-3": "with several consumers a single consumer may see messages out of order",
    "RQ-4": "a channel that closes requeues its outstanding deliveries",
    "RQ-5": "basic.recover(requeue=true) requeues every outstanding delivery of the channel",
    "RQ-6": "a message may be requeued any number of times",
    "DS-1": "a ready message goes to one consumer with room, round-robin",
    "DS-2": "basic.get answers get-empty on an empty queue; get-ok carries the count of messages left",
    "PC-1": "confirm.select puts the channel in confirm mode; a new channel starts without it",
    "PC-2": "every publish on a confirm-mode channel is confirmed exactly once",
    "PC-3": "a confirm's tag is the publish sequence number; multiple confirms every one up to it",
    "PC-4": "an unroutable message is confirmed once the exchange finds no queue (after its basic.return)",
    "PC-5": "a persistent message is confirmed only once it is on disk",
    "PC-6": "basic.nack is sent only when a queue fails to take the message",
    "PC-7": "confirms may come in another order than the publishes",
    "PC-8": "a channel cannot be in both confirm and tx mode",
    "PC-9": "publishing to an exchange that does not exist is 404 and closes the channel",
    "PC-10": "a confirmed persistent message in a durable queue survives a broker crash",
    "TX-1": "tx.select makes the channel transactional for the rest of its life",
    "TX-2": "publishes in a transaction reach no queue until tx.commit; tx.rollback drops them",
    "TX-3": "settlements in a transaction are applied at tx.commit; tx.rollback leaves them outstanding",
    "TX-4": "a rollback does not requeue messages that were delivered",
    "TX-5": "errors in a transaction are detected when the method arrives, not at commit",
    "TX-6": "the basic.return of an unroutable mandatory publish in a transaction comes before tx.commit-ok",
    "TX-7": "tx.commit-ok means every effect of the transaction is visible",
    "TX-8": "committed persistent publishes survive a crash",
    "TX-9": "a crash during tx.commit may leave any subset of the transaction applied",
    "TX-10": "tx.commit or tx.rollback on a channel that is not transactional is 406 PRECONDITION_FAILED",
    "TX-11": "declaring or deleting queues and bindings is never transactional",
    "DU-1": "durable queues survive a restart, others do not",
    "DU-2": "persistent messages in durable queues survive a restart once on disk",
    "DU-3": "after a restart no delivery is outstanding and recovered messages are redelivered",
    "DU-4": "an exclusive queue belongs to its connection and goes with it",
    "ER-1": "a channel error closes only the channel; a closing channel answers nothing but close-ok",
    "ER-2": "reply codes are AMQP 0-9-1's: channel errors close the channel, connection errors the connection",
    "ER-3": "bad input never crashes the broker nor loses or duplicates a message",
    "RT-1": "the default exchange routes to the queue the routing key names",
    "RT-2": "a message routed to several queues is an independent copy in each",
    "RT-3": "an unroutable mandatory message comes back with basic.return",
}

# Rules a program run against a live broker cannot show broken, and why (the rest are observable).
UNOBSERVABLE = {
    "PC-7": "it allows confirms in any order: nothing a broker does can break it",
    "RQ-3": "it allows a consumer to see messages out of order: nothing a broker does can break it",
    "RQ-6": "it allows requeue loops: nothing a broker does can break it",
    "PF-5": "it allows deliveries already sent beyond a lowered bound: nothing a broker does can break it",
    "TX-9": "it allows any subset of a transaction after a crash: nothing a broker does can break it",
    "PC-6": "a nack needs a queue that fails to take a message, which no client can cause",
}

# Rules only programs that crash the broker can show (--kill-cmd and --start-cmd).
NEED_CRASHES = ("DU-1", "DU-2", "DU-3", "PC-5", "PC-10", "TX-8")


def family(rule: str) -> str:
    """The family of a rule ID: "ACK" for "ACK-4"."""
    return rule.split("-")[0]


def ordered(rules) -> list:
    """Rule IDs in catalogue order."""
    order = {rule: n for n, rule in enumerate(RULES)}
    return sorted(set(rules), key=lambda r: order.get(r, len(order)))
