"""What makes an endless execution of a setup a cycle of the explored graph, and which cycles count.

`rabbitproof check` answers "can a message loop for ever?" and "can the publisher wait for ever?" as
liveness questions (spark_check.liveness): a fair cycle reachable from the start. Three things make
them answerable on a finite graph:

- **Tags do not count.** A requeued message comes back with a new delivery tag (DT-1, DT-2), so no
  state of a requeue loop would ever repeat. ``renumber_tags`` renumbers each channel's tags 1, 2, ...
  in their order, and the engines fingerprint that form (the machine's ``canonical`` hook): the spec
  only compares tags and issues a larger one, so states equal but for tag numbers behave alike
  (data independence, Wolper 1986), and the real tags still show in every trace.
- **The spec's own ghosts do not count.** The spec keeps history variables for its own properties
  (``State.fates``, ``delivered``, ``confirmed_msgs``, ``tx_groups``, ``events``, ``revived``, and each
  client view's ``last_msg`` and ``disorder``: no guard and no effect reads them, spec.state). The
  questions do not read them either, so ``forget_ghosts`` clears them after every step of the machine:
  a loop that only adds to a history still closes, the states kept are smaller, and no state compares
  message ids of two publishers (which would stop publishers being interchangeable, spec.symmetry).
- **The programs do not run out.** The spec bounds every step that could repeat (spec.budgets); the
  budgets the applications' own programs spend (``ENDLESS``: requeues, basic.qos, basic.get) would
  turn a consumer that requeues for ever into one that stops after two requeues. The machine never
  spends them (``unspent``). Faults keep their budgets: each happens at most as often as the setup
  says, so every infinite execution eventually has no more faults.
- **Fairness.** A cycle where a part of the system that could act never does is not an execution
  anyone worries about (the broker stopped, the consumer hung). ``SetupFairness`` names the weakly
  fair classes: whenever one is enabled in every state of a cycle, the cycle must take it.
"""
from __future__ import annotations

from typing import Any, NamedTuple

from rabbitproof.spec import actions as A
from rabbitproof.spec.frames import BASIC_ACK, BASIC_DELIVER, BASIC_GET_OK, BASIC_NACK, BASIC_REJECT
from rabbitproof.spec.state import State, with_conn, with_used

# The budgets of spec.budgets that the applications' programs spend, not the faults: a consumer may
# requeue (nack, reject) at every delivery, set its prefetch on every channel it opens, poll for ever.
# A consumer whose failure handling is to close its channel (``on_failure = "close-channel"``)
# spends ``closes`` too (rabbitproof.check.answers.machine_for).
ENDLESS = ("requeues", "qos", "gets")


def unspent(state: State, endless: tuple[str, ...]) -> State:
    """``state`` with the budgets ``endless`` names back at 0: the spec only compares a budget's counter
    with the configuration's bound, so this is the spec with no bound on them."""
    used = state.used
    for name in endless:            # a loop, not any(...): this runs after every step of the machine
        if getattr(used, name):
            return with_used(state, used._replace(**{name: 0 for name in endless}))
    return state


# --- tags renumbered --------------------------------------------------------------------------------

_DELIVERED = (BASIC_DELIVER, BASIC_GET_OK)                  # broker -> client
_SETTLED = (BASIC_ACK, BASIC_REJECT, BASIC_NACK)             # client -> broker (confirms go the other way)


def _channel_tags(conn: Any, c: int, ch: int, ghost: Any) -> list[int]:
    """Every delivery tag channel ``ch`` of connection ``c`` names anywhere, and its next tag. Each place is
    looked at only when it holds something: most are empty in most states, and this runs for every channel
    of every successor."""
    tags = set(_conn_tags(conn)[ch - 1])
    if ghost.held:
        tags.update([e[2] for e in ghost.held if e[0] == c and e[1] == ch])
    if ghost.worked:
        tags.update([e[2] for e in ghost.worked if e[0] == c and e[1] == ch])
    tags.discard(0)                                 # "none" (last_tag) and "all" (ACK-3): not a tag
    return sorted(tags)


def _tags_in(conn: Any, ch: int) -> list[int]:
    """The delivery tags channel ``ch`` of ``conn`` names in the connection itself, and its next tag, sorted
    (0, "none" or "all", left out)."""
    channel, view = conn.channels[ch - 1], conn.clients[ch - 1]
    tags = {channel.next_tag, view.last_tag}
    if channel.unacked:
        tags.update([u.tag for u in channel.unacked])
    if channel.tx_settles:
        tags.update([u.tag for _, u in channel.tx_settles])
    if view.held:
        tags.update(view.held)
    if view.tx_held:
        tags.update(view.tx_held)
    fifo = conn.to_client[ch]
    if fifo:
        tags.update([f.delivery_tag for f in fifo if f.method in _DELIVERED])
    fifo = conn.to_broker[ch]
    if fifo:
        tags.update([f.delivery_tag for f in fifo if f.method in _SETTLED])
    if conn.auto:
        tags.update([a[1] for a in conn.auto if a[0] == ch])
    tags.discard(0)
    return sorted(tags)


_CONN_TAGS: dict[int, tuple[Any, tuple[list[int], ...]]] = {}    # id(conn) -> (conn, ``_tags_in`` of each channel)
CONN_TAGS_CAPACITY = 65_536


def _conn_tags(conn: Any) -> tuple[list[int], ...]:
    """``_tags_in`` of every channel of ``conn``, remembered by the connection's identity: a connection is
    shared by every state where it is as it was, and tags are renumbered for every successor."""
    known = _CONN_TAGS.get(id(conn))
    if known is not None and known[0] is conn:
        return known[1]
    if len(_CONN_TAGS) >= CONN_TAGS_CAPACITY:
        _CONN_TAGS.clear()
    tags = tuple(_tags_in(conn, ch) for ch in range(1, len(conn.channels) + 1))
    _CONN_TAGS[id(conn)] = (conn, tags)
    return tags


def canonical(watched: Any) -> Any:
    """The form of ``watched`` the engines fingerprint: tags renumbered (the machine's states carry no
    ghost of the spec: ``forget_ghosts``)."""
    return renumber_tags(watched)


def forget_ghosts(state: State, action: Any = None) -> State:
    """``state`` with the spec's history variables cleared (the module docstring says why), and, after a
    ``ClientReceive``, the receiving view's last message and ``disorder`` (the spec's RQ-3 ghost, which
    compares ids across publishers; the questions keep their own, per publisher). The machine applies
    it after every step, so its states never hold them."""
    if state.fates or state.delivered or state.confirmed_msgs or state.tx_groups or state.events or state.revived:
        state = state._replace(fates=(), delivered=(), confirmed_msgs=(), tx_groups=(), events=0, revived=())
    if type(action) is A.ClientReceive and action.ch:
        conn = state.conns[action.conn]
        view = conn.clients[action.ch - 1]
        if view.last_msg or view.disorder:
            clients = conn.clients[:action.ch - 1] + (view._replace(last_msg=0, disorder=False),) + \
                conn.clients[action.ch:]
            state = with_conn(state, action.conn, conn._replace(clients=clients))
    return state


def renumber_tags(watched: Any) -> Any:
    """``watched`` (rabbitproof.check.questions.Watched) with each channel's delivery tags, next tag
    included, renumbered 1, 2, ... in their order (the module docstring says why)."""
    state, ghost = watched
    maps: dict[tuple[int, int], dict[int, int]] = {}
    marked = {e[0] for e in ghost.held + ghost.worked}      # the clients the ghost names tags of
    for c, conn in enumerate(state.conns):
        for ch, own in enumerate(_conn_tags(conn), 1):
            tags = _channel_tags(conn, c, ch, ghost) if c in marked else own
            if tags and tags[-1] != len(tags):      # sorted and distinct: 1..n exactly when the last is n
                maps[(c, ch)] = {t: n for n, t in enumerate(tags, 1)}
    if not maps:
        return watched
    conns = tuple(_renumbered_conn(conn, c, maps) if any(k[0] == c for k in maps) else conn
                  for c, conn in enumerate(state.conns))

    def entry(e: tuple) -> tuple:
        m = maps.get((e[0], e[1]))
        return e if m is None else e[:2] + (m[e[2]],) + e[3:]

    ghost = ghost._replace(held=tuple(sorted(map(entry, ghost.held))), worked=tuple(sorted(map(entry, ghost.worked))))
    return type(watched)(state._replace(conns=conns), ghost)


def _renumbered_conn(conn: Any, c: int, maps: dict) -> Any:
    """Connection ``c`` with the tags of its channels in ``maps`` renumbered."""
    channels, clients = list(conn.channels), list(conn.clients)
    to_client, to_broker = list(conn.to_client), list(conn.to_broker)
    auto = conn.auto
    for ch in range(1, len(channels) + 1):
        m = maps.get((c, ch))
        if m is None:
            continue
        keep = lambda t: m.get(t, t)            # noqa: E731 - 0 stays 0
        channel, view = channels[ch - 1], clients[ch - 1]
        channels[ch - 1] = channel._replace(
            next_tag=m[channel.next_tag], unacked=tuple(u._replace(tag=m[u.tag]) for u in channel.unacked),
            tx_settles=tuple((kind, u._replace(tag=m[u.tag])) for kind, u in channel.tx_settles))
        clients[ch - 1] = view._replace(held=tuple(m[t] for t in view.held), tx_held=tuple(m[t] for t in view.tx_held),
                                        last_tag=keep(view.last_tag))
        to_client[ch] = tuple(f._replace(delivery_tag=keep(f.delivery_tag)) if f.method in _DELIVERED else f
                              for f in to_client[ch])
        to_broker[ch] = tuple(f._replace(delivery_tag=keep(f.delivery_tag)) if f.method in _SETTLED else f
                              for f in to_broker[ch])
        auto = tuple((a[0], m[a[1]]) + a[2:] if a[0] == ch else a for a in auto)
    return conn._replace(channels=tuple(channels), clients=tuple(clients), to_client=tuple(to_client),
                         to_broker=tuple(to_broker), auto=auto)


# --- fairness -------------------------------------------------------------------------------------

# The weakly fair classes, by the actions in them. Each is per connection and channel, but for the
# broker's deliveries (per queue) and the disk and the restart (one each). Not fair, so free never to
# happen: every fault (a crash, a lost connection, a queue refusing, a channel closed), and what an
# application may choose not to do (roll back, recover, cancel).
_BY_CHANNEL = (             # (what it says, its steps, the channel numbers it has: 0 the connection's own)
    ("the broker takes the frames of {who}", (A.BrokerTakeFrame,)),
    ("the broker confirms the publishes of {who}", (A.BrokerConfirm,)),
    ("the broker answers the commits of {who}", (A.BrokerCommitOk,)),
    ("the broker answers the channel close of {who}", (A.BrokerCloseOk,)),
    ("{who} reads the frames that reach it", (A.ClientReceive,)),
    ("{who} opens its channel again", (A.ClientChannelOpen,)),
    ("{who} answers a channel close", (A.ClientChannelCloseOk,)),
    ("{who} handles the delivery it holds (acks, nacks, rejects or does the work)",
     (A.ClientAck, A.ClientNack, A.ClientReject)),
    ("{who} sets up (selects confirms or tx, declares, sets its prefetch, consumes)",
     (A.ClientConfirmSelect, A.ClientTxSelect, A.ClientDeclareQueue, A.ClientBindQueue, A.ClientQos, A.ClientConsume)),
    ("{who} polls (basic.get)", (A.ClientGet,)),
    ("{who} publishes its messages (and commits them)", (A.ClientPublish, A.ClientTxCommit)),
    ("{who} connects again", (A.ClientConnect,)),
)


def _channels(step: type, channels: int) -> range:
    """The channel numbers a class of ``step`` exists for: the connection's own (0) for a reconnect,
    0 and every channel for the frames both ways, every channel for the rest."""
    if step is A.ClientConnect:
        return range(0, 1)
    return range(0 if step in (A.BrokerTakeFrame, A.ClientReceive) else 1, channels + 1)


ASSUMED = ("Loops and waiting for ever are judged on the cycles of the explored graph, in executions where the "
           "broker keeps taking frames, delivering to consumers with room, confirming, answering and writing to "
           "disk, the clients keep reading, publishing their messages, handling what they hold and connecting "
           "again (each weakly fair: it cannot stay possible for ever without happening), and each fault "
           "happens at most as the setup says")

_SINGLE = (("the disk writes what is pending", (A.DiskFsync,)), ("the broker restarts after a crash", (A.BrokerRestart,)),
           ("the broker notices a client that vanished (a heartbeat timeout)", (A.BrokerDetect,)))


class SetupFairness(NamedTuple):
    """The fair classes of one setup: ``classes`` their names (bit i of a mask is class i), and the class
    of each kind of step (``class_of``). Interchangeable consumers (the setup's symmetry) share their
    classes: "the broker keeps taking frames from one of the workers", a weaker assumption than per
    worker, so that the answers are the same with the symmetry reduction and without."""

    classes: tuple[str, ...]
    index: dict                     # type: ignore[assignment]  # (kind, conn or queue, ch) -> class
    kinds: dict                     # action class -> kind (its position in _BY_CHANNEL or _SINGLE)

    @staticmethod
    def of(config: Any, machine: Any, handling: tuple[type, ...] = (),
           publishing: tuple[type, ...] = ()) -> "SetupFairness":
        """The classes of ``config`` explored by ``machine``, shared by the connections of one of its
        ``orbits`` (the symmetry's); ``handling``: the machine's own steps that
        handle a delivery (a consumer's work before its ack), in the class of its acks; ``publishing``:
        its own kinds of publish (a republish), in the class of its publishes."""
        orbits = machine.orbits(config)
        names: list[str] = []
        index: dict = {}
        kinds: dict = {}
        for kind, (text, steps) in enumerate(_BY_CHANNEL):
            for step in steps + (handling if A.ClientAck in steps else ()) + \
                    (publishing if A.ClientPublish in steps else ()):
                kinds[step] = kind
            for c in range(config.connections):
                for ch in _channels(steps[0], config.channels):
                    key = (kind, orbits[c], ch)
                    if key not in index:
                        index[key] = len(names)
                        who = f"c{key[1]}" + (" (on its connection)" if not ch else
                                              f" (channel {ch})" if config.channels > 1 else "")
                        names.append(text.format(who=who))
                    index[(kind, c, ch)] = index[key]
        for q in range(len(config.queues)):
            index[("deliver", q)] = len(names)
            names.append(f"the broker delivers from q{q} to a consumer with room")
        kinds[A.BrokerDeliver] = "deliver"
        for text, steps in _SINGLE:
            for step in steps:
                kinds[step] = text
            index[(text,)] = len(names)
            names.append(text)
        return SetupFairness(tuple(names), index, kinds)

    def class_of(self, action: Any) -> int:
        """The fair class of ``action``; -1 when it need never happen."""
        kind = self.kinds.get(type(action))
        if kind is None:
            return -1
        if kind == "deliver":
            return self.index[("deliver", action.queue)]
        if isinstance(kind, str):
            return self.index[(kind,)]
        # A step on a slot holding a vanished connection (spec.faults.vanish) belongs to no client's class:
        # the broker's noticing it (BrokerDetect, fair) ends what it holds.
        return self.index.get((kind, action.conn, action.ch), -1)
