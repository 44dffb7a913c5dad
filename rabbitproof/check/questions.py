"""The five questions `rabbitproof check` asks of a user's setup, and the machine whose observer
(rabbitproof.check.observer) lets the spec answer them.

The questions are about what the applications believe and do, which the spec's state does not record:
which messages a publisher believes delivered, which a consumer has processed and how often, in what
order each consumer saw each publisher's messages. ``SetupMachine`` runs ``spec.machine`` unchanged and
watches every step beside it (a history variable, as the spec's own ghosts are): the spec decides what
can happen, the observer only records it, so the answers come from the spec alone.

What the applications are taken to do, as RabbitMQ's guides describe them:

- a publisher believes a message delivered when its publish returns (no confirms, no transaction), when
  the broker acknowledges it (confirm mode, PC-3), or when the commit that holds it is committed
  (the tx.commit-ok of that very commit: a commit-ok answers the oldest commit of its channel still
  unanswered, TX-7); never when it came back with basic.return (RT-3) or was nacked (PC-6), and not
  once its channel or connection is gone before the answer came (it then knows to publish again);
- a consumer processes a message when it acknowledges it (manual acks: the work and the ack are one
  step), or, when its work is done before the ack (``work = "before-ack"``), at the work, a step of its
  own (``ConsumerWork``) that a crash may follow before the ack is sent; or when it receives it
  (automatic acks); a nack or reject is a failure, not a processing.

The questions:

1. ``believed_never_lost``: a message the publisher believes delivered is never gone from the broker,
   the wire and the disk without having been processed (a basic.return on its way keeps it: the
   publisher will learn it was not delivered, RT-3);
2. ``processed_at_most_once``: no message is processed twice;
3. ``seen_in_publication_order``: no consumer receives a message after a later one of the same publisher;
4. ``no_requeue_loop``, a liveness question (rabbitproof.check.cycles, spark_check.liveness): no fair
   infinite execution hands a message out again and again without ever processing it (RQ-6);
5. ``publisher_answered``, a liveness question too: no fair execution leaves a publish unconfirmed or a
   commit unanswered for ever on a channel that stays open, whether it cycles or ends (PC-2, TX-7).

The first three hold in every state or fail in one; the last two are about infinite executions, judged
on the explored graph under the fairness of rabbitproof.check.cycles. "Lost" is about the whole execution
too (the message never reaches a consumer), but once gone from everywhere a message never comes back, so
the first state where it is gone decides it: no fairness is needed, and nothing is assumed about what
happens afterwards (``lost_messages``). A message that stays in its queue for ever is not lost, it
waits: question 4 if it is handed out again and again.
"""
from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any, NamedTuple

from rabbitproof.spec import actions as A
from rabbitproof.spec import machine
from rabbitproof.spec.frames import BASIC_GET, BASIC_GET_EMPTY, BASIC_GET_OK, MSG_STRIDE
from rabbitproof.spec.properties_api import Liveness, Property
from rabbitproof.spec.roles import IDLE
from rabbitproof.spec.state import C_OPEN, CONN_UP, MODE_CONFIRM, MODE_TX, State, with_used
from rabbitproof.spec.symmetry import Symmetry, automorphisms

from rabbitproof.check.after_crash import crashed
from rabbitproof.check.cycles import ENDLESS, SetupFairness, canonical, forget_ghosts, unspent
from rabbitproof.check.disk_at_once import DiskAtOnce
from rabbitproof.check.interchangeable import SortedSymmetry, classes_of, rename_watched
from rabbitproof.check.observer import NOTHING_YET, PROCESSED_CAP, Ghost, bump, live_messages, observe, original
from rabbitproof.check.own_connection import OWN, stepped
from rabbitproof.check.pure_reads import PureReads
from rabbitproof.check.set_up_at_once import Fused, SetUpAtOnce
from rabbitproof.check.spent_budgets import SpentBudgets

@dataclass(frozen=True)
class ConsumerWork(A.ClientAction):
    """The consumer does the work of delivery ``delivery_tag`` it holds, before it acknowledges it: the message is
    processed now, and a crash before the ack means the work is done again after redelivery (AM-3, RQ-4)."""

    delivery_tag: int

    def __str__(self) -> str:
        return f"do the work of delivery tag {self.delivery_tag} (not yet acknowledged)"


@dataclass(frozen=True)
class Republish(A.ClientPublish):
    """The publisher publishes message ``again`` once more, which it knows was not delivered: nacked (PC-6:
    "the client may then publish it again"), returned (RT-3), or its channel gone before the answer (it
    must assume it lost, PC-9). The spec's basic.publish of the connection's next message
    (``A.ClientPublish``), which the observer counts as ``again``."""

    again: int = 0

    def plain(self) -> A.ClientPublish:
        """The spec's action."""
        return A.ClientPublish(self.conn, self.ch, self.exchange, self.routing_key, self.mandatory, self.persistent,
                               self.immediate)

    def __str__(self) -> str:
        c, n = divmod(self.again, MSG_STRIDE)
        return f"publish m{c}.{n} again: " + super().__str__()


class Watched(NamedTuple):
    """A state of the spec and what the applications believe in it."""

    spec: State
    ghost: Ghost


@dataclass(frozen=True)
class SetupMachine:
    """``spec.machine`` with the observer beside it, and the clients run as the applications do.

    The spec's roles let a channel try its actions in any order, which suits a search for the broker's
    corner cases; an application runs a program. Of the actions the spec enables, this machine keeps
    those the setup's programs take:

    - a publisher publishes only after its confirm.select or tx.select (PC-1, TX-1), and no more than its
      own ``messages``: ``limits[c]`` bounds the publishes of connection c (the spec bounds them in all);
    - a consumer declares its exclusive queue and sets its prefetch before it consumes, once on each
      channel it opens (DU-4, PF-2);
    - a consumer handles its deliveries one at a time, in the order they arrived: it settles the oldest
      one it holds (ack, nack or reject), or with multiple=true any batch that starts there (ACK-2).
    - a consumer that polls asks for one message at a time with basic.get, once it holds none and no
      get is on its way either way (DS-2).

    A connection is lost, its client vanishes, or the broker closes its channel with an error only
    where the setup's faults say (``lossy``, ``vanishing``, ``erring``). A consumer closes its channel
    without end where that is how it fails (``closing``: such a close spends no budget), and otherwise
    only as the fault, which spends the spec's ``closes`` but for the one kept for those consumers
    (``setup_model.to_config``). Everything else (the broker, the disk, the network, the other faults,
    every interleaving of the clients) is the spec's, unfiltered. A frozen dataclass of ints: it pickles, so the Spark engine ships it to
    executors as it is.
    """

    limits: tuple[int, ...]         # per connection: the messages its publisher publishes (republishes aside)
    lossy: tuple[bool, ...]         # per connection: whether the faults may lose it (NetworkLoss)
    works: tuple[bool, ...] = ()    # per connection: its consumer does the work before the ack (ConsumerWork)
    endless: tuple[str, ...] = ENDLESS  # the spec's budgets the programs spend without end (``unspent``)
    vanishing: tuple[bool, ...] = ()    # per connection: whether its client may vanish (ClientVanish)
    erring: tuple[bool, ...] = ()       # per connection: whether the broker may close its channel (BrokerChannelError)
    republish: tuple[int, ...] = ()     # per connection: how many times in all its publisher may publish again
    beliefs: bool = True                # whether the observer keeps what publishers believe delivered (``believed``,
                                        # ``returned``): not where "lost" is proved for every size (``machine_for``)
    closing: tuple[bool, ...] = ()      # per connection: its consumer closes its channel on failure, without end
    apart: bool = False                 # no two clients interchangeable (``symmetry``, ``clients_apart``)

    def initial_states(self, config: Any) -> tuple[Watched, ...]:
        return tuple(Watched(forget_ghosts(s), NOTHING_YET) for s in machine.initial_states(config))

    def enabled(self, watched: Watched, config: Any) -> tuple:
        state, ghost = watched.spec, watched.ghost
        taken = tuple(a for a in machine.enabled(state, config)
                      if type(a) not in _PROGRAM_STEPS or _programs_take(self, state, ghost, config, a))
        if ghost.redo:
            taken = tuple(_as_republish(a, ghost) if type(a) is A.ClientPublish else a for a in taken)
        if not any(self.works):
            return taken
        return taken + work_steps(self.works, state, ghost)

    def takes(self, watched: Watched, config: Any, action: Any) -> bool:
        """Whether the programs take ``action``, which the spec enables in ``watched`` (``enabled``'s filter)."""
        return type(action) not in _PROGRAM_STEPS or _programs_take(self, watched.spec, watched.ghost, config, action)

    def step(self, watched: Watched, action: Any) -> tuple[Watched, tuple]:
        kind = type(action)
        if kind in OWN:                           # a function of its own connection: remembered (own_connection)
            return stepped(self, watched, action, self.step_itself)
        if kind is A.BrokerCrash:                 # a function of what survives it: remembered (after_crash)
            return crashed(self, watched, action, self.step_itself)
        return self.step_itself(watched, action)

    def step_itself(self, watched: Watched, action: Any) -> tuple[Watched, tuple]:
        """``step``, always computed (``step`` remembers what a crash leaves)."""
        if type(action) is ConsumerWork:            # the application's own step: the spec's state is unchanged
            return Watched(watched.spec, did_work(watched.ghost, watched.spec, action)), ()
        after, labels = machine.step(watched.spec, action.plain() if type(action) is Republish else action)
        if type(action) is A.ClientChannelClose and self.closing and self.closing[action.conn]:
            after = with_used(after, after.used._replace(closes=watched.spec.used.closes))
        ghost = observe(watched.ghost, watched.spec, after, action, labels, self.works, self.republish)
        if not self.beliefs and (ghost.believed or ghost.returned):
            ghost = ghost._replace(believed=(), returned=())
        return Watched(forget_ghosts(unspent(after, self.endless), action), ghost), labels

    def canonical(self, watched: Watched) -> Watched:
        """The form the engines fingerprint (rabbitproof.check.cycles.canonical): each channel's delivery
        tags renumbered 1, 2, ... in their order (``step`` has cleared the spec's own ghosts). States equal
        but for tag numbers and histories are one state of the search, so that a message requeued and delivered
        again, with a new tag (DT-2), comes back to the same state and a requeue loop is a cycle of the
        graph. Sound because the spec and the observer use tags only to compare them (equal, less:
        ACK-2) and to issue a larger one (DT-1), and read no ghost of the spec."""
        return canonical(watched)

    def fused_takes(self, config: Any) -> Fused:
        """The ``por`` reduction of a setup, fused into the step that made them possible: a sheltered
        client's set-up steps (rabbitproof.check.set_up_at_once), then a client's read of a reply that
        changes nothing but the wire (rabbitproof.check.pure_reads), then, once no crash is left, the
        disk's writes (rabbitproof.check.disk_at_once)."""
        return Fused(SetUpAtOnce(self, config), PureReads(self, config), DiskAtOnce(self, config))

    def subsumption(self, config: Any) -> SpentBudgets:
        """The ``budgets`` reduction (rabbitproof.check.spent_budgets): a state is not explored when a twin
        that spent less of the faults' budgets is."""
        return SpentBudgets()

    def fairness(self, config: Any) -> "SetupFairness":
        """The fair classes of actions (SetupFairness): what keeps running in an infinite execution."""
        return SetupFairness.of(config, self, handling=(ConsumerWork,), publishing=(Republish,))

    def terminal_ok(self, watched: Watched, config: Any) -> bool:
        """An end state is a proper end unless a publisher still waits for a confirm or a commit-ok."""
        return not publisher_waits(watched)

    def symmetry(self, config: Any) -> Any:
        """The ``symmetry`` reduction of a setup (spec.symmetry): the configuration's renamings
        that also keep each connection's message limit and whether faults may lose it, applied to the spec
        state and to the ghost. Two consumers with the same settings are interchangeable, and so are two
        publishers, their messages renamed with them (``rename_watched``): the machine's states compare
        message ids of one publisher only (``forget_ghosts`` clears the spec's RQ-3 ghost, which compares
        them across publishers; the questions' own ``last`` is kept per publisher). No renaming at all where
        the machine keeps its clients ``apart``."""
        if self.apart:
            return Symmetry(config, (), rename_watched)
        settings = self.settings()
        kept = tuple(g for g in automorphisms(config, publishers=True)
                     if all(settings[d] == settings[c] for c, d in enumerate(g.conns)))
        classes = classes_of(kept, config.connections) if kept else None
        if classes is None:
            return Symmetry(config, kept, rename_watched)
        publishers = frozenset(c for c, limit in enumerate(self.limits) if limit)
        return SortedSymmetry(config, kept, rename_watched, classes, publishers)

    def settings(self) -> tuple[tuple, ...]:
        """Per connection, what the machine holds of it beside the configuration's roles: a renaming of
        ``symmetry`` keeps them."""
        n = len(self.limits)
        return tuple(zip(self.limits, self.lossy, self.works or (False,) * n, self.vanishing or (False,) * n,
                         self.erring or (False,) * n, self.republish or (0,) * n, self.closing or (False,) * n))

    def orbits(self, config: Any) -> tuple[int, ...]:
        """Per connection, the least connection ``symmetry`` may rename it to (itself where none, or where
        the machine keeps its clients ``apart``), found without listing the renamings: a setup of twenty
        clients has more than the search could ever list (spec.symmetry.automorphisms tries every
        permutation of the connections). With one channel a connection (every setup's), a renaming of
        ``automorphisms`` sends c to d exactly when their roles are equal, and ``symmetry`` keeps those
        that keep ``settings``: c and d are in one orbit when both are equal.
        tests/test_check_lassos.py holds this to the orbits of the renamings on the examples."""
        if self.apart:
            return tuple(range(config.connections))
        if config.channels != 1:
            raise ValueError("orbits: a setup's configuration has one channel a connection")
        settings = self.settings()
        first: dict = {}
        return tuple(first.setdefault((_role_of(config, c), settings[c]), c) for c in range(config.connections))


def _role_of(config: Any, c: int) -> Any:
    """The role of connection c's one channel, None where it has none (spec.symmetry.automorphisms leaves
    those out)."""
    role = config.roles.get((c, 1))
    return None if role is None or role == IDLE else role


def clients_apart(machine_: SetupMachine) -> SetupMachine:
    """``machine_`` with no two clients interchangeable: the symmetry renames nothing, so every client's
    fair classes are its own (``SetupFairness.of`` groups by ``orbits``).

    The search's fairness lets interchangeable clients share their classes ("the broker keeps taking frames
    from one of the twins"): that is what makes the symmetry reduction keep fair cycles, and its "cannot
    happen" holds under the stronger fairness too. But a cycle it finds may be fair only that way: one twin
    polls or closes its channel again and again while the other never reads what was sent to it. Each
    client keeps working in RabbitMQ (its own socket, read by its own process), so such a lasso is no
    answer; ``answers.check_setup`` then searches this machine (rabbitproof.check.lassos)."""
    return replace(machine_, apart=True)


_PROGRAM_STEPS = frozenset({A.ClientPublish, A.ClientConsume, A.ClientGet, A.ClientQos, A.ClientAck, A.ClientNack,
                            A.ClientReject, A.NetworkLoss, A.ClientVanish, A.BrokerChannelError,
                            A.ClientChannelClose})


def _programs_take(machine_: SetupMachine, state: State, ghost: Ghost, config: Any, a: Any) -> bool:
    """Whether the application on channel (a.conn, a.ch) takes this step now (SetupMachine's rules)."""
    prepared = ghost.prepared
    if type(a) is A.NetworkLoss:
        return machine_.lossy[a.conn]
    if type(a) is A.ClientVanish:
        return bool(machine_.vanishing) and machine_.vanishing[a.conn]
    if type(a) is A.BrokerChannelError:
        return bool(machine_.erring) and machine_.erring[a.conn]
    if type(a) is A.ClientChannelClose:         # the fault's closes: the spec's budget but the one kept
        closing = machine_.closing              # for the consumers that close on failure (which spend none)
        return bool(closing) and closing[a.conn] or state.used.closes < config.closes - any(closing)
    kind, c, ch = type(a), a.conn, a.ch
    view = state.conns[c].clients[ch - 1]
    if kind is A.ClientPublish:
        role = config.roles[(c, ch)]
        if role.confirm and view.mode != MODE_CONFIRM or role.tx and view.mode != MODE_TX:
            return False
        if any(e[0] == c for e in ghost.redo):      # a message to publish again comes first
            return True
        made = sum(1 for copy, _ in ghost.copies if copy // MSG_STRIDE == c)
        return state.conns[c].published - made < machine_.limits[c]
    if kind is A.ClientConsume:
        role = config.roles[(c, ch)]
        if any(not view.setup & (1 << q) for q in role.declare):
            return False
        return not role.qos or (c, ch) in prepared
    if kind is A.ClientGet:                         # one poll at a time, once it holds nothing (DS-2)
        role = config.roles[(c, ch)]
        if any(not view.setup & (1 << q) for q in role.declare) or view.held:
            return False
        conn = state.conns[c]
        return not any(f.method == BASIC_GET for f in conn.to_broker[ch]) and \
            not any(f.method in (BASIC_GET_OK, BASIC_GET_EMPTY) for f in conn.to_client[ch])
    if kind is A.ClientQos:
        return (c, ch) not in prepared
    if kind is A.ClientAck and machine_.works and machine_.works[c]:    # the work comes first
        done = {e[2] for e in ghost.worked if e[:2] == (c, ch)}
        if any(t not in done for t in view.held if t <= a.delivery_tag):
            return False
    if kind is not A.ClientReject and a.multiple:
        return True                                 # a batch: every delivery held up to a.delivery_tag
    return bool(view.held) and a.delivery_tag == view.held[0]


def _as_republish(a: A.ClientPublish, ghost: Ghost) -> A.ClientPublish:
    """A publish of a publisher that owes a message again: that message's republish (it comes first)."""
    again = next((e[1] for e in ghost.redo if e[0] == a.conn), None)
    if again is None:
        return a
    return Republish(a.conn, a.ch, a.exchange, a.routing_key, a.mandatory, a.persistent, a.immediate, again)


def work_steps(works: tuple, state: State, ghost: Ghost) -> tuple:
    """The work steps the consumers that work before the ack may take: on the oldest delivery they hold
    whose work is not done (they work in the order deliveries came)."""
    out = []
    for c, working in enumerate(works):
        if not working or state.conns[c].status != CONN_UP:
            continue
        for ch, view in enumerate(state.conns[c].clients, start=1):
            if view.status != C_OPEN:
                continue
            done = {e[2] for e in ghost.worked if e[:2] == (c, ch)}
            todo = next((t for t in view.held if t not in done), None)
            if todo is not None:
                out.append(ConsumerWork(c, ch, todo))
    return tuple(out)


def did_work(g: Ghost, state: State, action: ConsumerWork) -> Ghost:
    """The ghost once the consumer has done the work of a delivery it holds: that message is processed."""
    c, ch, tag = action.conn, action.ch, action.delivery_tag
    msg = original(g, next(e[3] for e in g.held if e[:3] == (c, ch, tag)))
    return g._replace(counts=bump(g.counts, msg), worked=tuple(sorted(g.worked + ((c, ch, tag),))))


def publisher_waits(watched: Watched) -> bool:
    """A publish unconfirmed, or a commit unanswered, on a channel that is still open."""
    return bool(watched.ghost.awaiting or watched.ghost.committing)


# --- the questions --------------------------------------------------------------------------------

def lost_messages(watched: Watched) -> set[int]:
    """The messages lost in ``watched``: believed delivered by their publisher, never processed, and gone
    from everywhere (``live_messages``: no copy of them, or of a republish of them, is left, nor a return
    on its way). Lost for good: no step brings a message back from nowhere (the spec's copies only move
    between the places ``live_messages`` looks at), and a publisher that believes a message delivered
    does not publish it again; tests/test_check.py checks it on every step of the examples."""
    ghost = watched.ghost
    if not ghost.believed:
        return set()
    processed = {m for m, _ in ghost.counts}
    unprocessed = [m for m in ghost.believed if m not in processed]
    if not unprocessed:
        return set()
    live = live_messages(watched.spec)
    if ghost.copies:
        live = {original(ghost, m) for m in live}
    return {m for m in unprocessed if m not in live}


def believed_never_lost(watched: Watched) -> bool:
    """No message is lost (``lost_messages``). Because lost is for good, this is a property of each state:
    an execution that loses a message reaches a state where it is lost, and stays there, so "lost" needs
    no cycle and no fairness, unlike the liveness questions."""
    return not lost_messages(watched)


def processed_at_most_once(watched: Watched) -> bool:
    return all(p < 2 for _, p in watched.ghost.counts)


def seen_in_publication_order(watched: Watched) -> bool:
    return not watched.ghost.disorder


def always(watched: Watched) -> bool:
    """True in every state: a question whose cycles need no condition on every state."""
    return True


def handed_out_unprocessed(watched: Watched) -> bool:
    """A message not yet processed (or processed once: then not again, PROCESSED_CAP) is out on a
    channel, delivered and not settled. On a cycle of the graph a message's processed count cannot
    grow (the state comes back), so a fair cycle through such a state hands the message out again
    and again and never processes it: a requeue loop (RQ-6)."""
    processed = dict(watched.ghost.counts)
    for conn in watched.spec.conns:
        for channel in conn.channels:
            for u in channel.unacked:
                if processed.get(u.msg, 0) < PROCESSED_CAP:
                    return True
    return False


@dataclass(frozen=True)
class Question:
    """One question: its key, how it reads, the rules it is about, and its property: one that must hold
    in every state (``prop``), or one about infinite executions (``live``)."""

    key: str
    text: str
    rules: tuple[str, ...]
    prop: Property | None
    live: Liveness | None = None

    @property
    def name(self) -> str:
        """The name of its property."""
        return (self.prop or self.live).name


def _property(name: str, rules: tuple[str, ...], holds, doc: str) -> Property:
    return Property(name, "always", rules, holds, doc)


QUESTIONS: tuple[Question, ...] = (
    Question("lost", "Can a message the publisher believes delivered be lost?",
             ("AM-2", "ACK-6", "PC-4", "PC-5", "PC-10", "DU-2", "RT-3"),
             _property("believed_never_lost", ("PC-10", "DU-2", "AM-2"), believed_never_lost,
                       "A message the publisher believes delivered is never gone unprocessed.")),
    Question("twice", "Can a consumer process a message twice?",
             ("AM-3", "RQ-2", "RQ-4", "DU-3", "TX-8"),
             _property("processed_at_most_once", ("RQ-4", "DU-3"), processed_at_most_once,
                       "No message is processed twice.")),
    Question("order", "Can a consumer see messages out of publication order?",
             ("RQ-1", "RQ-3", "DS-1"),
             _property("seen_in_publication_order", ("RQ-1", "RQ-3"), seen_in_publication_order,
                       "No consumer receives a message after a later one of the same publisher.")),
    Question("loop", "Can a message stay in the queue for ever (a requeue loop)?",
             ("RQ-6", "ACK-5", "ACK-6", "RQ-4"), None,
             Liveness("no_requeue_loop", ("RQ-6",),
                      "No fair infinite execution hands a message out again and again without processing it.",
                      always, handed_out_unprocessed)),
    Question("waits", "Can the publisher wait for ever for a confirm?",
             ("PC-2", "PC-6", "TX-7"), None,
             Liveness("publisher_answered", ("PC-2", "TX-7"),
                      "No fair execution leaves a publish unconfirmed or a commit unanswered for ever on a "
                      "channel that stays open (a cycle, or an end where nothing fair is left to happen).",
                      publisher_waits, always, at_end=True)),
)
PROPERTIES: tuple[Property, ...] = tuple(q.prop for q in QUESTIONS if q.prop is not None)
LIVENESS: tuple[Liveness, ...] = tuple(q.live for q in QUESTIONS if q.live is not None)
REGISTRY = {p.name: p for p in PROPERTIES}
