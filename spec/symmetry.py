"""Symmetry reduction (``--reduce symmetry``): states that differ only by a renaming of interchangeable
connections and channels are one state of the search.

The renamings
-------------
A renaming ``g`` maps connection c to ``g.conns[c]`` and its channel ch to ``g.channels[c][ch - 1]``;
queues keep their names. ``automorphisms(config)`` lists those other than the identity that map the
configuration onto itself: the role of every channel (c, ch) is the role of its image, and every
connection whose channels publish is its own image. The last clause is not a shortcut: message ids
name their publisher's connection (``c * MSG_STRIDE + n``, spec.frames) and the spec compares them
(``ClientReceive`` sets ``disorder`` when a message arrives after a larger id, RQ-3), so renaming a
publishing connection would change what the properties see. Queues are not renamed: no standard
configuration has two interchangeable queues, and a queue's index names it in frames, copies, fates
and the disk. Message payloads have nothing to rename: a message is its id, and ids are ordered. A model whose
states compare ids of one publisher only may rename publishers too, their messages with them
(``automorphisms(config, publishers=True)``, ``rename_messages``): `rabbitproof check`'s machine does.

``rename(state, g)`` applies ``g`` to every place a state names a connection or a channel: the order of
``State.conns``; in each connection the per-channel FIFOs both ways (and the channel number each frame
carries, ``frame.channel``), the channel of each automatic-mode delivery in flight (``Conn.auto``, kept in its
order), the broker's channels and the client's views; in each queue the consumers' ring entries
``(conn, ch, tag)`` (kept in round-robin order), the exclusive consumer, the exclusive owner
(connection + 1), the channel whose requeue a copy away waits for (``Queue.away``, kept sorted), and the
channel of a delivery on its way to one (``Queue.sending``). Nothing else names one (budgets, fates, the
disk and every ghost are keyed by queue, copy and message; consumer tags are the role's position, the
same on every channel). The slots past the configuration's connections, which hold vanished connections
until the broker notices (``faults.vanish``), are fixed: a vanished connection keeps no link to the slot
it came from, and a vanish takes the first free slot whichever connection vanishes.

How it reduces, and why no verdict changes
------------------------------------------
The search keys its visited set by orbit: the fingerprint of x is ``min(hash(g(x)))`` over the group
(identity included), the same for every state of x's orbit (``frozenset`` of the orbit in ``--exact``
mode). The state kept and expanded is the real state found first, and a trace is rebuilt by replaying
real edges whose target is in the next orbit, so every trace is a path of the model as it is.

This is the classic quotient argument (Ip and Dill; Emerson and Sistla), resting on three facts about
the spec, for every automorphism g and every state x (spark_check.equivariance checks all three on
every reachable state of a configuration, exactly):

1. the initial states are fixed by g;
2. the successors of g(x), as a multiset, are g applied to the successors of x, and terminal_ok(g(x))
   is terminal_ok(x) (the rules name connections and channels only as indices into the state, and the
   configuration gives renamed channels the same role);
3. every property has the same value on x and on g(x) (they quantify over all connections, channels and
   copies, and compare message ids only of one publisher, which g fixes).

By (1) and (2) the orbit of a state reachable in k steps is reachable in k steps from every member's
orbit-mate: a BFS over orbits from the initial orbit reaches exactly the orbits of reachable states, each
at the depth of its closest member. By (3) an orbit decides a property iff each of its states does.
So every verdict is the same, every shortest trace has the full search's length, deadlocks are reached
(counted once per orbit), and every action class that fires in the full graph fires in the reduced one
(g maps an action to one of its own class). Combined with ``por``: the normal form under fused takes
commutes with g (fusability reads the configuration, which g preserves, and the state of one channel,
which g renames; the takes are confluent), so the reduced graph's orbits are taken the same way.

Liveness: a liveness property's ``stays`` and ``recurs`` must have the same value on x and g(x) (3), and
the fair classes must be shared by interchangeable connections and channels, so that every g maps each
class onto itself (spec.fairness; `rabbitproof check`'s SetupFairness). Then a fair accepting cycle of
the full graph maps to a closed walk of orbits that is fair and accepting (an edge of class k in the full
cycle has an edge of class k between the same orbits), and a fair accepting cycle of orbits, a path from x
to g(x), repeated until g returns to the identity, is a fair accepting cycle of the full graph (the
classes enabled in g(y) are those enabled in y). End states map to end states. So the reduction keeps
fair cycles (``keeps_fair_cycles``): liveness verdicts are the same with it and without.

`rabbitproof check`'s machine (rabbitproof.check.questions.SetupMachine) wraps the spec's state with an observer
ghost and gives its own ``symmetry``: the configuration's renamings that also keep each connection's
message limit and whether a fault may lose it, applied to the spec state and to every (conn, ch) the
ghost names (``questions.rename_watched``). The same three facts are checked of it, questions included.
"""
from __future__ import annotations

from itertools import permutations, product
from typing import Any, Callable, NamedTuple

from .frames import FIELDS, MSG_STRIDE
from .roles import IDLE
from .state import Channel, ClientChannel, Entry, Pending, Queue, State, Unacked


class Renaming(NamedTuple):
    """Connection c becomes ``conns[c]``; its channel ch becomes ``channels[c][ch - 1]``."""

    conns: tuple[int, ...]
    channels: tuple[tuple[int, ...], ...]


def automorphisms(config: Any, publishers: bool = False) -> tuple[Renaming, ...]:
    """The renamings, other than the identity, that map ``config`` onto itself and fix every connection
    with a publishing role (module docstring), in a fixed order. With ``publishers``, connections that
    publish may be renamed too, for a model whose states compare message ids of one publisher only and
    that renames the ids with their connection (``rename_messages``)."""
    n, k = config.connections, config.channels
    roles = {key: r for key, r in config.roles.items() if r != IDLE}
    fixed = set() if publishers else {c for (c, _), r in roles.items() if r.publish}
    same = tuple(range(1, k + 1))
    identity = Renaming(tuple(range(n)), (same,) * n)
    found = []
    for pc in permutations(range(n)):
        if any(pc[c] != c for c in fixed):
            continue
        for pchs in product(permutations(range(1, k + 1)), repeat=n):
            g = Renaming(pc, pchs)
            if g == identity:
                continue
            if {(pc[c], pchs[c][ch - 1]): r for (c, ch), r in roles.items()} == roles:
                found.append(g)
    return tuple(found)


def _frames(fifos: tuple, perm: tuple[int, ...]) -> tuple:
    """Per-channel FIFOs (index 0: the connection's own) with channels renamed by ``perm``."""
    out = [fifos[0]] + [()] * len(perm)
    for ch, fifo in enumerate(fifos[1:], start=1):
        new = perm[ch - 1]
        out[new] = tuple(f._replace(channel=new) for f in fifo)
    return tuple(out)


def _permuted(items: tuple, perm: tuple[int, ...]) -> tuple:
    """Per-channel items (index ch - 1) with channels renamed by ``perm``."""
    out = list(items)
    for i, item in enumerate(items):
        out[perm[i] - 1] = item
    return tuple(out)


def rename(state: Any, g: Renaming) -> Any:
    """``state`` with its connections and channels renamed by ``g`` (module docstring). It runs for every
    renamed state the symmetry builds: a connection whose channels ``g`` keeps, and a queue that names
    no connection (no consumer, no exclusive owner, nothing away or on its way), are kept as they are."""
    conns = list(state.conns)
    gconns, gchannels = g.conns, g.channels
    n = len(gconns)
    for c, conn in enumerate(state.conns[:n]):
        perm = gchannels[c]
        if perm != _kept(len(perm)):
            conn = conn._replace(
                to_broker=_frames(conn.to_broker, perm), to_client=_frames(conn.to_client, perm),
                auto=tuple((perm[a[0] - 1],) + a[1:] for a in conn.auto),
                channels=_permuted(conn.channels, perm), clients=_permuted(conn.clients, perm))
        conns[gconns[c]] = conn

    def entry(e: tuple) -> tuple:
        c, ch, tag = e
        return (gconns[c], gchannels[c][ch - 1], tag) if c < n else e

    def away(a: tuple) -> tuple:        # (key, conn, ch): a copy that channel requeued behind a resume
        key, c, ch = a
        return (key, gconns[c], gchannels[c][ch - 1]) if c < n else a

    queues = []
    for q in state.queues:
        exists, durable, owner, dead_letter, ready, enqueued, ring, exclusive, born, held, sending = q
        if ring or exclusive or owner or held or sending:
            q = _new(type(q), (exists, durable, gconns[owner - 1] + 1 if 0 < owner <= n else owner, dead_letter,
                               ready, enqueued, tuple([entry(e) for e in ring]) if ring else ring,
                               entry(exclusive) if exclusive else exclusive, born,
                               tuple(sorted([away(a) for a in held])) if held else held,
                               entry(sending[:3]) + sending[3:] if sending else sending))
        queues.append(q)
    return _with(_with(state, _CONNS, tuple(conns)), _QUEUES, tuple(queues))


_KEPT: dict[int, tuple[int, ...]] = {}      # k -> (1, ..., k): the channels of a connection a renaming keeps


def _kept(k: int) -> tuple[int, ...]:
    """The permutation of k channels that keeps each one (built once for each k)."""
    kept = _KEPT.get(k)
    if kept is None:
        kept = _KEPT[k] = tuple(range(1, k + 1))
    return kept


def message_renaming(g: Renaming) -> Callable[[int], int] | None:
    """How ``g`` renames message ids: the n-th message of connection c becomes the n-th of ``g.conns[c]``
    (spec.frames); None when it moves no connection. 0 (no message) stays 0."""
    moved = {c: d for c, d in enumerate(g.conns) if c != d}
    if not moved:
        return None
    stride = MSG_STRIDE

    def of(msg: int) -> int:
        c, n = divmod(msg, stride)
        d = moved.get(c)
        return msg if d is None or not n else d * stride + n
    return of


def rename_messages(state: Any, of: Callable[[int], int], conns: tuple | None = None) -> Any:
    """``state`` with every message id renamed by ``of`` (``message_renaming``), wherever a state holds
    one: the queues' ready copies, the frames that carry a message (publish, deliver, get-ok, return), the
    automatic-mode deliveries in flight, the broker channels' outstanding deliveries, unconfirmed
    publishes and transaction buffers, and the disk; sets sorted by id sorted again. The spec's history
    variables that hold ids (``fates``, ``confirmed_msgs``, a view's ``last_msg``) are renamed too.
    It runs for every renaming of every successor, so it builds each tuple once (``tuple.__new__`` of a
    NamedTuple's fields, as spec.state's hot paths do) and leaves alone what holds no id. ``conns``: the
    connections ``conn_messages`` renamed, when the caller has them (a caller that remembers them)."""
    if conns is None:
        conns = tuple(conn_messages(conn, of) for conn in state.conns)
    queues = tuple(q if not q.ready else _with(q, _READY, tuple(_with(e, _ENTRY_MSG, of(e[_ENTRY_MSG]))
                                                                for e in q.ready)) for q in state.queues)
    queues = tuple(q if not q.sending else _with(q, _SENDING, q.sending[:3] + (
        _with(q.sending[3], _ENTRY_MSG, of(q.sending[3][_ENTRY_MSG])),)) for q in queues)
    fields = list(state)
    fields[_CONNS], fields[_QUEUES] = conns, queues
    if state.disk:
        fields[_DISK] = tuple(sorted((q, k, of(m)) for q, k, m in state.disk))
    if state.fates:
        fields[_FATES] = tuple(sorted(f[:3] + (of(f[3]),) + f[4:] for f in state.fates))
    if state.confirmed_msgs:
        fields[_CONFIRMED] = tuple(sorted(map(of, state.confirmed_msgs)))
    return _new(type(state), fields)


def conn_messages(conn: Any, of: Callable[[int], int]) -> Any:
    """One connection of ``rename_messages``: its frames, deliveries in flight, channels and views (the
    connection itself when none of them can hold an id)."""
    status, closed, published, to_broker, to_client, auto, channels, clients = conn
    busy = [ch for ch in channels if ch[_UNACKED] or ch[_UNCONFIRMED] or ch[_TX_PUBS] or ch[_TX_SETTLES]]
    named = [v for v in clients if v[_LAST_MSG]]
    if not (busy or named or auto or any(to_broker) or any(to_client)):
        return conn
    to_broker = tuple(_fifo_messages(f, of) if f else f for f in to_broker)
    to_client = tuple(_fifo_messages(f, of) if f else f for f in to_client)
    if auto:
        auto = tuple(a[:4] + (of(a[4]),) + a[5:] for a in auto)
    if busy:
        channels = tuple(_channel_messages(ch, of) if ch in busy else ch for ch in channels)
    if named:
        clients = tuple(v if not v[_LAST_MSG] else _with(v, _LAST_MSG, of(v[_LAST_MSG])) for v in clients)
    return _new(type(conn), (status, closed, published, to_broker, to_client, auto, channels, clients))


def _fifo_messages(frames: tuple, of: Callable[[int], int]) -> tuple:
    at = _MSG_AT
    out = []
    for f in frames:
        i = at.get(f.method)
        out.append(f if i is None else _new(type(f), f[:i] + (of(f[i]),) + f[i + 1:]))
    return tuple(out)


def _unacked_messages(u: Any, of: Callable[[int], int]) -> Any:
    return _with(u, _UNACKED_MSG, of(u[_UNACKED_MSG]))


def _channel_messages(ch: Any, of: Callable[[int], int]) -> Any:
    """A broker channel with the ids of its outstanding deliveries, unconfirmed publishes, transaction
    publishes and settlements renamed."""
    fields = list(ch)
    fields[_UNACKED] = tuple(_unacked_messages(u, of) for u in ch[_UNACKED])
    fields[_UNCONFIRMED] = tuple(_with(p, _PENDING_MSG, of(p[_PENDING_MSG])) for p in ch[_UNCONFIRMED])
    fields[_TX_PUBS] = tuple(t[:4] + (of(t[4]),) for t in ch[_TX_PUBS])
    fields[_TX_SETTLES] = tuple((kind, _unacked_messages(u, of)) for kind, u in ch[_TX_SETTLES])
    return _new(type(ch), fields)


_UNACKED, _UNCONFIRMED, _TX_PUBS, _TX_SETTLES = (Channel._fields.index(name) for name in
                                                ("unacked", "unconfirmed", "tx_pubs", "tx_settles"))
_LAST_MSG = ClientChannel._fields.index("last_msg")
_UNACKED_MSG, _PENDING_MSG, _ENTRY_MSG = (t._fields.index("msg") for t in (Unacked, Pending, Entry))
_READY, _SENDING = Queue._fields.index("ready"), Queue._fields.index("sending")
if Queue._fields != ("exists", "durable", "owner", "dead_letter", "ready", "enqueued", "ring", "exclusive", "born",
                     "away", "sending"):       # ``rename`` unpacks a queue by position
    raise ImportError("spec.symmetry.rename reads a Queue of other fields: write it for the new ones")
_CONNS, _QUEUES, _DISK, _FATES, _CONFIRMED = (State._fields.index(name) for name in
                                              ("conns", "queues", "disk", "fates", "confirmed_msgs"))
_new = tuple.__new__


def _with(t: Any, i: int, value: Any) -> Any:
    """NamedTuple ``t`` with field ``i`` replaced, built once."""
    return _new(type(t), t[:i] + (value,) + t[i + 1:])

# Where a frame carries its message id (spec.frames.FIELDS; the method and channel come first).
_MSG_AT = {code: 2 + fields.index("msg") for code, fields in FIELDS.items() if "msg" in fields}


class Symmetry:
    """The ``symmetry`` reduction of one configuration: ``fingerprint`` names a state's orbit."""

    name = "symmetry"
    keeps_fair_cycles = True        # "Liveness" in the module docstring

    def __init__(self, config: Any, renamings: tuple[Renaming, ...] | None = None,
                 rename_state: Callable[[Any, Renaming], Any] | None = None) -> None:
        self.renamings = automorphisms(config) if renamings is None else tuple(renamings)
        self.rename = rename if rename_state is None else rename_state   # a model whose states wrap the spec's

    def orbit(self, state: Any) -> list[Any]:
        """``state`` and its renamings (with repetitions when some renaming fixes it)."""
        rename_ = self.rename
        return [state] + [rename_(state, g) for g in self.renamings]

    def fingerprint_of(self, exact: bool) -> Callable[[Any], Any]:
        """The orbit's fingerprint: the least 64-bit hash of its states, or, exactly, the orbit itself."""
        orbit = self.orbit
        if exact:
            return lambda state: frozenset(orbit(state))
        return lambda state: min(map(hash, orbit(state)))


def symmetries(config: Any) -> int:
    """How many renamings of connections and channels, other than the identity, map ``config`` onto itself:
    with none, symmetry reduction merges no state."""
    return len(automorphisms(config))
