"""Answers "cannot happen" that hold for every number of publishers, consumers and messages, by argument.

An exhaustive search answers a setup within its bounds; the arguments here answer the same questions for
setups of any size, from what the setup file says alone. Each argument names its conditions, and
``argued`` applies it only where every one holds; elsewhere the question goes to the other methods
(``rabbitproof.check.smaller_setups``, the search), never to a guess. tests/test_check_by_argument.py
shows, for each condition, a setup that breaks only it where the search finds the event, and holds
every argument to the exhaustive search on small setups drawn at random.

The arguments rest on what every setup of `check` shares (rabbitproof.check.setup_model,
rabbitproof.check.cycles): each fault happens at most once, each publisher publishes finitely many
messages, and the fairness of ``cycles.SetupFairness`` (weak fairness per channel for the broker's and
the clients' steps, per queue for deliveries, the disk's writes and a restart as one class each). No
fairness between two consumers of one queue is assumed: which consumer a delivery goes to is the
queue's round-robin (DS-1), a rule of the machine, and the second loop argument uses that rule and no
promise beyond it.

**Lost**, beyond rabbitproof.check.for_every_size's shape (which covers crashes with persistent
messages in durable queues), where the broker does not crash: a publisher with confirms believes a
message delivered at its basic.ack, one with transactions at the tx.commit-ok of the commit holding it;
either way its queue, which always exists (shared, declared from the start, never deleted), took a copy
(TX-1, PC-3, PC-4). ``copies_conserved`` (proved by Z3 for every size) says every copy a queue took is
live or gone with a recorded fate; with no crash, manual acks, nothing dropped and no dead-letter queue,
the only fate left is "acknowledged", which is processed. So no believed message is lost, whether the
messages are persistent or not. A mandatory publish changes nothing here: the queue exists, so nothing
is returned. Conditions: ``confirmed_or_committed``, ``no_crash``, ``shared_no_dead_letter``,
``manual_never_drops``.

**Loop** (a message handed out again and again, never processed). A message goes from its queue to a
consumer only by a delivery (basic.deliver or basic.get-ok), and comes back to a queue only by a
requeue (RQ-4) or a dead-lettering (ACK-6). A requeue needs a nack or reject with requeue (ACK-5), a
channel or connection closed with the delivery outstanding (RQ-4), a broker's channel error (ER-1), a
vanished client noticed (RQ-3) or a crash (DU-3). With no consumer that requeues on failure and none
that closes its channel on failure, only faults requeue, and each happens at most once: a message is
requeued finitely often. With no cycle of dead-letter queues, a message is dead-lettered at most once
per queue. So each message is delivered finitely often. A consumer that holds a delivery settles it
(its ack is weakly fair and nothing but its channel's end disables it, which requeues or drops it), so
no fair execution keeps a message outstanding for ever either: the loop question's cycles, which pass
again and again through a state with a message handed out and unprocessed, do not exist. Nothing here
counts publishers, consumers, queues or messages. Conditions: ``no_requeue_on_failure``,
``no_close_on_failure``, ``no_dead_letter_cycle``.

**Loop, where a consumer that never fails shares the queue** (the round-robin, DS-1). A queue hands each
message to the first consumer of its round-robin with room, and that consumer moves to the back; a
consumer that subscribes, or subscribes again, joins at the back (RabbitMQ's rabbit_queue_consumers; the
spec's ``broker.next_consumer`` and ``broker.deliver``). What this gives a consumer, and all this argument
uses: one that stays subscribed with room all along gets a delivery before the queue has made as many as
there are consumers ahead of it, since each delivery moves one of them behind it. It promises nothing to
a consumer whose room comes and goes. Call a consumer of queue q *steady* when it subscribes (not
basic.get) and neither requeues nor closes its channel on failure: what it receives leaves q for good
(acked, received in automatic mode, or dropped, to a dead-letter queue that, with no cycle of them,
never leads back to q). A requeue loop is a fair cycle of the graph through a state with a message
handed out unprocessed. On a cycle no fault happens and nothing is published (the counters of both only
grow), so no copy is made and none that left q for good comes back: a steady consumer s of q receives
nothing on the cycle. So s holds nothing on it: a delivery it held there would be held all along, its
handling enabled all along and never taken (the class is s's, or shared with consumers interchangeable
with s, steady too, which receive nothing either). And s is subscribed with its channel open all along:
only a fault closes it, and opening and subscribing again are fair. So on the cycle s is in q's
round-robin with room in every state; a delivery from q would go to a consumer ahead of s and move it
behind s, and nothing moves one ahead of s; the cycle comes back to its first state, so it holds no
delivery from q. Now take the message handed out unprocessed on the cycle, held by consumer k. k's
handling is fair, and settling any delivery k holds (or closing its channel) ends it: it is processed,
leaves for good, or comes back to a queue, which hands it out again only by a delivery on the cycle,
that is from a queue with no steady consumer. By the conditions, such a queue has no consumer that
requeues or closes its channel on failure, so a copy comes back to it only by a fault, never on a
cycle. And basic.get takes no turn in the round-robin: a consumer that polls, fails and requeues may take
the message back before the round-robin hands it on, so no such consumer may be there. Nothing here
counts publishers, consumers, queues or messages. Conditions: ``steady_beside_each_requeuer``,
``requeuers_subscribe``, ``no_dead_letter_cycle``.

**Waits** (a publish unconfirmed, or a commit unanswered, for ever on a channel that stays open).
Once the last fault has happened (each happens at most once), a publish on an open confirm channel is
in the broker's frames from that channel, then routed, written to disk if persistent and durable, then
confirmed with basic.ack or basic.nack (PC-2, PC-3, PC-6), and the confirm read by the publisher; a
commit the same way to tx.commit-ok (TX-7). Each of these steps is in a weakly fair class of its own
channel, or the disk's, and stays possible until it is taken: the broker takes its frames in order,
confirms what is routed and written, answers a commit in order, and the disk writes what is pending;
nothing another client does disables them (another connection's frames, deliveries and acks are other
classes, and a queue refusing a message nacks it, which answers it). A channel that closes ends the
wait (the publisher then knows, PC-9). So every wait ends, however many publishers, consumers and
messages the setup has. This is the argument of the spec's ``confirms_eventually_answered`` (PC-2),
decided on the spec's own configurations (tests/test_spec_liveness.py), written here for any number of
channels: each step it uses belongs to the waiting channel, its queue or the disk. Its core is a rank
of each waiting publish (model.ranking: 2 waiting for the broker's confirm, 1 confirm on its way, 0
read by the publisher, 3 dropped), and Z3 proves, for any number of connections, channels and
publishes, that no step of any client, the broker or the disk raises it or takes the publish's number
away while its channel is open on both ends (``rank_never_rises``), that the broker's confirm lowers
it (``confirm_answers``) and the publisher's read of the confirm brings it to 0 (``reading_answers``)
(proofs.ranking, in `rabbitproof verify`'s proofs part). What Z3 does not prove is that the confirming
and reading steps stay possible until taken: they read facts the model leaves free (which frame is
next, whether the queues took the publish); that is the weak fairness above, and the spec decides it
on its configurations. Condition:
``fair_broker`` (the fairness above; `check` always assumes it, and tests/test_check_by_argument.py
shows that without the broker's confirms being fair the search finds a wait).

**Twice** (a message processed twice). A message is processed at its ack (work and ack are one step),
at its receipt (automatic acks), or at the work of a consumer that works before it acks. Processed
again needs a second delivery of the same message, or a second copy of it. Copies come only from a
publisher that republishes. A second delivery of a message already acked needs the ack not taken by the
broker before a requeue: a connection lost or vanished with the ack in flight, a broker's channel error
(which ignores the acks on their way, ER-1), or a crash that restores it from disk (DU-3: only a
persistent message in a durable queue is restored, so a crash counts only where the setup has both); a consumer's
own channel close keeps the acks sent before it (RQ-4). Received in automatic mode, a message is gone
from the broker but for a crash (DU-3). A consumer that works before it acks has processed a message it
has not acked yet: any requeue of it (its own close, a nack or reject, a fault) brings it back
processed. Conditions: ``no_republish``, ``no_fault_loses_an_ack`` (no lost or vanished connection, no
channel error, no crash), ``work_before_ack_never_returned`` (a consumer that works before its ack
fails in no way that returns a message and its channel is not closed by a fault).

**Order** (a consumer receives a message after a later one of the same publisher). A publisher's
messages go out in order on its one channel, into one queue, which hands them out in its order (RQ-1,
DS-1). A consumer sees them out of that order only if one comes back to a queue behind or before the
others: a requeue (RQ-1, RQ-3) or a dead-lettering, whose order is that of the rejections, not the
publication; or a copy republished after later messages. Conditions: ``no_republish``,
``no_requeue_at_all`` (no consumer requeues or closes its channel on failure, no fault that requeues:
a channel or connection lost or closed, a vanished client, a crash that restores persistent messages of a
durable queue), ``no_dead_letter``.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Callable

from rabbitproof.check.for_every_size import proved_for
from rabbitproof.check.setup_file import Setup

REQUEUEING = ("nack-requeue", "reject-requeue")


@dataclass(frozen=True)
class Condition:
    """One condition of an argument: its name, what it says in a report, and the test of a setup."""

    name: str
    text: str
    holds: Callable[[Setup], bool]


@dataclass(frozen=True)
class Argument:
    """A "cannot happen" for every size: the question, what carries it (the argument's name, or proved
    invariants), and its conditions."""

    question: str
    by: str
    conditions: tuple[Condition, ...]
    invariants: tuple[str, ...] = ()        # the invariants proved by Z3 (model/invariants.py) it rests on
    ranking: tuple[str, ...] = ()           # the ranking obligations proved by Z3 (model/ranking.py) it rests on
    name: str = ""                          # where a question has two arguments: the second one's

    @property
    def key(self) -> str:
        """The argument's name: its question's, or its own where the question has two."""
        return self.name or self.question

    def covers(self, setup: Setup) -> bool:
        return all(c.holds(setup) for c in self.conditions)

    def failing(self, setup: Setup) -> tuple[str, ...]:
        """The conditions ``setup`` breaks, by name."""
        return tuple(c.name for c in self.conditions if not c.holds(setup))

    @property
    def shape(self) -> str:
        return ", ".join(c.text for c in self.conditions)


def dead_letter_cycle(setup: Setup) -> bool:
    """Whether following the queues' dead-letter targets from some queue comes back to it."""
    target = {q.name: q.dead_letter for q in setup.queues if q.dead_letter}
    for start in target:
        seen, at = set(), start
        while at in target and at not in seen:
            seen.add(at)
            at = target[at]
            if at == start:
                return True
    return False


def _faults(setup: Setup, *names: str) -> bool:
    """Whether any of the faults ``names`` may happen; a crash counts only where it can bring a message back:
    a restart restores only persistent messages of durable queues (DU-2, DU-3), and takes away the rest."""
    on = [n for n in names if getattr(setup.faults, n)]
    if on == ["broker_crash"]:
        return crash_restores(setup)
    return bool(on)


def crash_restores(setup: Setup) -> bool:
    """Whether a crash can bring a message back: some queue is durable and some publisher persistent."""
    return any(q.durable for q in setup.queues) and any(p.persistent for p in setup.publishers)


def requeues_on_failure(consumer) -> bool:
    """Whether a consumer sends a message it fails on back to its queue: a nack or reject with requeue, or
    its channel closed with the delivery outstanding (RQ-4)."""
    return consumer.on_failure in REQUEUEING + ("close-channel",)


def steady_beside_each_requeuer(setup: Setup) -> bool:
    """Whether each queue a consumer requeues to on failure has a steady consumer: one that subscribes and
    does not requeue on failure (module docstring, "Loop, where a consumer that never fails ...")."""
    return all(any(k.queue == c.queue and not k.polls and not requeues_on_failure(k) for k in setup.consumers)
               for c in setup.consumers if requeues_on_failure(c))


NO_REQUEUE_ON_FAILURE = Condition(
    "no_requeue_on_failure", "no consumer nacks or rejects with requeue",
    lambda s: all(c.on_failure not in REQUEUEING for c in s.consumers))
NO_CLOSE_ON_FAILURE = Condition(
    "no_close_on_failure", "no consumer closes its channel on failure",
    lambda s: all(c.on_failure != "close-channel" for c in s.consumers))
NO_DEAD_LETTER_CYCLE = Condition(
    "no_dead_letter_cycle", "no cycle of dead-letter queues", lambda s: not dead_letter_cycle(s))
STEADY_BESIDE_EACH_REQUEUER = Condition(
    "steady_beside_each_requeuer", "each queue a consumer requeues to on failure (by a nack, a reject or closing "
                                   "its channel) has a consumer that subscribes and never does",
    steady_beside_each_requeuer)
REQUEUERS_SUBSCRIBE = Condition(
    "requeuers_subscribe", "no consumer that requeues on failure polls with basic.get",
    lambda s: not any(c.polls and requeues_on_failure(c) for c in s.consumers))
FAIR_BROKER = Condition(
    "fair_broker", "the broker keeps taking frames, confirming, answering commits and writing to disk",
    lambda s: True)
NO_REPUBLISH = Condition(
    "no_republish", "no publisher publishes a message again", lambda s: all(not p.republish for p in s.publishers))
LOSES_AN_ACK = ("connection_closed", "host_vanished", "channel_error", "broker_crash")
NO_FAULT_LOSES_AN_ACK = Condition(
    "no_fault_loses_an_ack", "no lost or vanished connection, no channel error, no broker crash that restores "
                             "messages (persistent ones in a durable queue)",
    lambda s: not _faults(s, *LOSES_AN_ACK))
WORK_BEFORE_ACK_NEVER_RETURNED = Condition(
    "work_before_ack_never_returned",
    "a consumer that works before its ack does nothing on failure and no fault closes its channel",
    lambda s: all(c.work != "before-ack" for c in s.consumers)
    or (all(c.on_failure == "none" for c in s.consumers if c.work == "before-ack")
        and not s.faults.channel_closed))
REQUEUE_FAULTS = LOSES_AN_ACK + ("channel_closed",)
NO_REQUEUE_AT_ALL = Condition(
    "no_requeue_at_all", "no consumer requeues or closes its channel on failure, no fault requeues a message",
    lambda s: all(not requeues_on_failure(c) for c in s.consumers)
    and not _faults(s, *REQUEUE_FAULTS))
NO_DEAD_LETTER = Condition(
    "no_dead_letter", "no dead-letter queue", lambda s: not any(q.dead_letter for q in s.queues))

CONFIRMED_OR_COMMITTED = Condition(
    "confirmed_or_committed", "every publisher uses confirms or transactions",
    lambda s: all(p.confirms or p.transactions for p in s.publishers))
NO_CRASH = Condition("no_crash", "the broker does not crash", lambda s: not s.faults.broker_crash)
SHARED_NO_DEAD_LETTER = Condition(
    "shared_no_dead_letter", "every queue is shared with no dead-letter queue",
    lambda s: all(not q.exclusive and not q.dead_letter for q in s.queues))
MANUAL_NEVER_DROPS = Condition(
    "manual_never_drops", "every consumer acks manually and never drops a message",
    lambda s: all(c.acks == "manual" and c.on_failure not in ("nack-drop", "reject-drop") for c in s.consumers))

ARGUMENTS: tuple[Argument, ...] = (
    Argument("lost", "a message believed delivered was taken by its queue, and with no crash no copy a queue "
                     "took is gone but acknowledged", (CONFIRMED_OR_COMMITTED, NO_CRASH, SHARED_NO_DEAD_LETTER,
                                                      MANUAL_NEVER_DROPS), ("copies_conserved",)),
    Argument("loop", "every requeue needs a fault, and each fault happens at most once",
             (NO_REQUEUE_ON_FAILURE, NO_CLOSE_ON_FAILURE, NO_DEAD_LETTER_CYCLE)),
    Argument("loop", "a message a consumer requeues goes round the queue's consumers (DS-1) and reaches one that "
                     "never fails, which takes its turn",
             (STEADY_BESIDE_EACH_REQUEUER, REQUEUERS_SUBSCRIBE, NO_DEAD_LETTER_CYCLE), name="loop-round-robin"),
    Argument("waits", "every step that answers a publish or a commit is fair and stays possible until taken",
             (FAIR_BROKER,), ranking=("rank_never_rises", "confirm_answers", "reading_answers")),
    Argument("twice", "no copy of a message and no second delivery of one processed",
             (NO_REPUBLISH, NO_FAULT_LOSES_AN_ACK, WORK_BEFORE_ACK_NEVER_RETURNED)),
    Argument("order", "messages reach each consumer in their queue's order, which is their publisher's",
             (NO_REPUBLISH, NO_REQUEUE_AT_ALL, NO_DEAD_LETTER)),
)


@dataclass(frozen=True)
class Argued:
    """Why ``question`` cannot happen in a setup of any size: by an argument of this module, or by
    invariants proved in Z3 (rabbitproof.check.for_every_size)."""

    question: str
    by: str
    invariants: tuple[str, ...]
    shape: str
    ranking: tuple[str, ...] = ()

    def text(self) -> str:
        if self.invariants:
            return (f"proved for every size: the invariants {' and '.join(self.invariants)} (proved by Z3) imply it "
                    f"when {self.shape}")
        if self.ranking:
            return (f"proved for every size by argument ({self.by}), on a rank of each waiting publish that no step "
                    f"raises and the steps answering it lower ({', '.join(self.ranking)}: proved by Z3 for every "
                    f"size), since {self.shape}")
        return f"proved for every size by argument ({self.by}), since {self.shape}"


def argued(setup: Setup, question: str) -> Argued | None:
    """How ``question``'s "cannot happen" holds for ``setup`` at every size, or None when no argument covers it."""
    proved = proved_for(setup, question)
    if proved is not None:
        return Argued(question, "proved invariants", proved.invariants, proved.shape)
    for argument in ARGUMENTS:
        if argument.question == question and argument.covers(setup):
            confirms = any(p.confirms for p in setup.publishers)      # the rank is of publishes awaiting a confirm
            return Argued(question, argument.by, argument.invariants, argument.shape,
                          argument.ranking if confirms else ())
    return None
