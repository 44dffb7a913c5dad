"""The fingerprint of a setup state's orbit, found by sorting interchangeable clients rather than by
trying every renaming; and how a renaming applies to a setup's state (``rename_watched``).

`rabbitproof check`'s symmetry group (``SetupMachine.symmetry``) renames connections only, one channel
each: it is every permutation within each class of connections with the same settings (publishers with
theirs, consumers with theirs). ``spec.symmetry.Symmetry`` names an orbit by the least hash over the
whole group, one renamed state per renaming: with two publishers and two consumers that is four states
built and hashed for every successor. ``SortedSymmetry`` builds one in the common case:

1. each publisher of a class gets a key that no renaming changes: its connection with its own message
   ids written relative to it (``n`` for its n-th message), and what the observer records of those
   messages (its unconfirmed publishes, open transaction and commits, how often each was processed,
   which are believed delivered or returned), again without connection numbers;
2. the publishers of each class are put in the order of their keys (the k-th smallest key to the k-th
   connection of the class), their messages renamed with them;
3. in that state, each consumer of a class gets its connection and the observer's entries about it
   (held and worked deliveries, prepared channels, the last message of each publisher it saw), without
   its own number, as key, and the consumers are put in order the same way;
4. where keys tie, every order of the tied clients is tried; the fingerprint is the least hash of the
   states so made.

Why it names orbits exactly as the least hash over the group does: a renaming h of a state x moves each
client's key with it (the keys hold no connection number and rename publishers' messages with them), so
the orders of steps 2 and 3 for h(x) are those for x composed with h^-1, and the set of states of step 4
is the same for x and h(x): the least hash is the same. And every state made is x renamed by a member
of the group, so two states get the same fingerprint only if they are in one orbit (or their hashes
collide, as always). ``tests/test_reductions_symmetry.py`` checks on every reachable state of several
setups that the two fingerprints partition the states alike.
"""
from __future__ import annotations

from itertools import permutations, product
from math import factorial
from typing import Any, Callable

from rabbitproof.spec.frames import MSG_STRIDE
from rabbitproof.spec.symmetry import Renaming, Symmetry, conn_messages, message_renaming, rename, rename_messages

from rabbitproof.check.observer import Ghost


def classes_of(renamings: tuple[Renaming, ...], n: int) -> tuple[tuple[int, ...], ...] | None:
    """The classes of connections the renamings permute (those of two or more), when the renamings are
    exactly every permutation within each class with channels kept (one channel per connection); else
    None."""
    if any(perm != tuple(range(1, len(perm) + 1)) for g in renamings for perm in g.channels):
        return None
    parent = list(range(n))

    def root(c: int) -> int:
        while parent[c] != c:
            c = parent[c]
        return c
    for g in renamings:
        for c, d in enumerate(g.conns):
            parent[root(c)] = root(d)
    groups: dict[int, list[int]] = {}
    for c in range(n):
        groups.setdefault(root(c), []).append(c)
    classes = tuple(tuple(m) for m in groups.values() if len(m) > 1)
    size = 1
    for members in classes:
        size *= factorial(len(members))
    return classes if size == len(renamings) + 1 else None


OWN_CAPACITY = 65_536      # publishers' connections made relative, remembered (``SortedSymmetry.publisher_head``)


class SortedSymmetry(Symmetry):
    """``spec.symmetry.Symmetry`` of a setup whose group permutes classes of connections: the same
    orbits, named by sorting (module docstring). ``publishers`` tells which classes publish."""

    def __init__(self, config: Any, renamings: tuple[Renaming, ...], rename_state: Callable[[Any, Renaming], Any],
                 classes: tuple[tuple[int, ...], ...], publishers: frozenset[int]) -> None:
        super().__init__(config, renamings, rename_state)
        self.n = config.connections
        self.channels = renamings[0].channels           # every channel kept (classes_of)
        self._made: dict[tuple, Renaming | None] = {}   # the renamings _orders has built, by the orders picked
        self._own: dict[tuple[int, Any], Any] = {}      # (publisher, connection): that connection, ids relative
        self.publisher_classes = tuple(m for m in classes if m[0] in publishers)
        self.consumer_classes = tuple(m for m in classes if m[0] not in publishers)

    def fingerprint_of(self, exact: bool) -> Callable[[Any], Any]:
        """The least hash of ``representatives`` (the orbit itself in exact mode, as the base class)."""
        if exact:
            return super().fingerprint_of(exact)
        representatives = self.representatives
        return lambda state: min(map(hash, representatives(state)))

    def representatives(self, watched: Any) -> list[Any]:
        """The states of step 4 (module docstring): ``watched`` with its clients sorted by their keys."""
        rename = self.rename
        out = []
        for order in self._orders(watched, self.publisher_classes, self.publisher_head, publisher_rest):
            sorted_publishers = watched if order is None else rename(watched, order)
            for then in self._orders(sorted_publishers, self.consumer_classes, consumer_head, consumer_rest):
                out.append(sorted_publishers if then is None else rename(sorted_publishers, then))
        return out

    def _orders(self, watched: Any, classes: tuple, head: Callable[[Any, int], Any],
                rest: Callable[[Any, int], tuple]) -> list[Renaming | None]:
        """The renamings that put each class's clients in the order of their keys, every order of tied
        keys tried (None for the identity). A client's key is ``(head,) + rest`` (``head`` its connection,
        ``rest`` what the observer records of it), compared as such; ``rest`` is computed only where the
        heads tie (on the benchmark setup of `rabbitproof check`, 1 pair in 7)."""
        choices: list[tuple[tuple[int, ...], ...]] = []
        for members in classes:
            if len(members) == 2:                   # the common case, without the general machinery
                a, b = members
                ka, kb = head(watched, a), head(watched, b)
                if ka == kb:
                    ka, kb = rest(watched, a), rest(watched, b)
                choices.append(((a, b),) if ka < kb else ((b, a),) if kb < ka else ((a, b), (b, a)))
                continue
            keyed = sorted(((head(watched, c),) + rest(watched, c), c) for c in members)
            runs: list[list[int]] = []
            previous: Any = object()
            for k, c in keyed:
                if k == previous:
                    runs[-1].append(c)
                else:
                    runs.append([c])
                previous = k
            # The k-th client in key order goes to the k-th connection of the class; tied ones in any order.
            choices.append(tuple(tuple(c for part in option for c in part)
                                 for option in product(*(permutations(run) for run in runs))))
        if all(len(options) == 1 and options[0] == members for options, members in zip(choices, classes)):
            return [None]
        return [self._renaming(classes, picked) for picked in product(*choices)]

    def publisher_head(self, watched: Any, p: int) -> Any:
        """The head of publisher ``p``'s key: its connection with its own ids made relative, remembered: a
        search meets few distinct connections of a publisher (a connection is shared by every state where
        its client and the broker's end of it are as they were), and making one relative rebuilds all it
        holds."""
        conn = watched[0].conns[p]
        if not conn.published:
            return conn
        own = self._own.get((p, conn))
        if own is None:
            if len(self._own) >= OWN_CAPACITY:
                self._own.clear()
            low, high = p * MSG_STRIDE, (p + 1) * MSG_STRIDE
            own = self._own[(p, conn)] = conn_messages(conn, lambda msg: msg - low if low < msg < high else msg)
        return own

    def _renaming(self, classes: tuple, picked: tuple) -> Renaming | None:
        """The renaming that sends the clients of each class, in the order ``picked``, to its connections."""
        found = self._made.get(picked)
        if found is None and picked not in self._made:
            conns = list(range(self.n))
            for members, order in zip(classes, picked):
                for slot, c in zip(members, order):
                    conns[c] = slot
            found = None if conns == list(range(self.n)) else Renaming(tuple(conns), self.channels)
            self._made[picked] = found
        return found


def publisher_rest(watched: Any, p: int) -> tuple:
    """What the observer records of publisher ``p``'s messages, without connection numbers and with its own
    ids made relative (nothing before its first publish): its key but for its connection. An empty
    record gives an empty part, built without a pass over it (most are empty in most states)."""
    state, ghost = watched
    if not state.conns[p].published:
        return ()
    low, high = p * MSG_STRIDE, (p + 1) * MSG_STRIDE

    def relative(msg: int) -> int:
        return msg - low if low < msg < high else msg
    return (tuple((e[1],) + e[2:3] + (relative(e[3]),) for e in ghost.awaiting if e[0] == p) if ghost.awaiting else (),
            tuple((e[1], relative(e[2])) for e in ghost.tx_open if e[0] == p) if ghost.tx_open else (),
            tuple((e[1], e[2], tuple(map(relative, e[3]))) for e in ghost.committing if e[0] == p)
            if ghost.committing else (),
            tuple((relative(m), n) for m, n in ghost.counts if low < m < high) if ghost.counts else (),
            tuple(relative(m) for m in ghost.believed if low < m < high) if ghost.believed else (),
            tuple(relative(m) for m in ghost.returned if low < m < high) if ghost.returned else (),
            tuple((relative(m), relative(o)) for m, o in ghost.copies if low < m < high) if ghost.copies else (),
            tuple(relative(m) for c, m in ghost.redo if c == p) if ghost.redo else ())


def consumer_head(watched: Any, c: int) -> Any:
    """The head of consumer ``c``'s key: its connection."""
    return watched[0].conns[c]


def consumer_rest(watched: Any, c: int) -> tuple:
    """The observer's entries about consumer ``c``, without its number: its key but for its connection."""
    ghost = watched[1]
    return (tuple(e[1:] for e in ghost.held if e[0] == c) if ghost.held else (),
            tuple(e[1:] for e in ghost.worked if e[0] == c) if ghost.worked else (),
            tuple(e[1:] for e in ghost.prepared if e[0] == c) if ghost.prepared else (),
            tuple(e[1:] for e in ghost.last if e[0] == c) if ghost.last else ())


_RENAMINGS: dict[Any, Any] = {}            # renaming -> its renaming of message ids, made once
_RENAMED: dict[tuple[int, int], tuple[Any, Any]] = {}     # (id of a connection, id of a renaming of ids) ->
RENAMED_CAPACITY = 65_536                                 # (the connection, the connection with its ids renamed)


def _message_renaming(g: Any) -> Any:
    """``spec.symmetry.message_renaming(g)``, made once for each renaming (its identity keys ``_RENAMED``)."""
    of = _RENAMINGS.get(g)
    if of is None:
        of = _RENAMINGS[g] = message_renaming(g)
    return of


def _conn_messages(conn: Any, of: Any) -> Any:
    """``spec.symmetry.conn_messages(conn, of)``, remembered by the connection's identity: a connection is
    shared by every state where it is as it was, and publishers are renamed for many of them."""
    met = _RENAMED.get((id(conn), id(of)))
    if met is not None and met[0] is conn:
        return met[1]
    if len(_RENAMED) >= RENAMED_CAPACITY:
        _RENAMED.clear()
    renamed = conn_messages(conn, of)
    _RENAMED[(id(conn), id(of))] = (conn, renamed)
    return renamed


def rename_watched(watched: Any, g: Any) -> Any:
    """``watched`` (rabbitproof.check.questions.Watched) with connections and channels renamed by ``g``
    (spec.symmetry.Renaming): the spec state, and every (conn, ch) the ghost names, with the publisher of
    ``last`` (a connection too); and, where ``g`` moves a connection that has published, every message id of the state and the ghost
    (spec.symmetry.rename_messages), sets of ids sorted again. It runs for every renamed state the
    symmetry builds, so an empty field of the ghost (most are, in most states) is kept as it is."""
    conns_of, channels_of = g.conns, g.channels

    def at(e: tuple) -> tuple:
        c = e[0]
        return (conns_of[c], channels_of[c][e[1] - 1]) + e[2:]

    state, gh = watched
    tx_open, committing, awaiting, believed, returned, held, counts, last, disorder, prepared, worked, copies, \
        redo = gh
    conns = state.conns
    of = _message_renaming(g) if any(d != c and conns[c].published for c, d in enumerate(conns_of)) else None
    if of is not None:
        state = rename_messages(state, of, tuple(_conn_messages(conn, of) for conn in conns))
        if copies:
            copies = tuple(sorted((of(m), of(o)) for m, o in copies))
        if redo:
            redo = tuple((c, of(m)) for c, m in redo)
        if believed:
            believed = tuple(sorted(map(of, believed)))
        if returned:
            returned = tuple(sorted(map(of, returned)))
        if counts:
            counts = tuple(sorted((of(m), p) for m, p in counts))
        if tx_open:
            tx_open = tuple(e[:2] + (of(e[2]),) for e in tx_open)
        if committing:
            committing = tuple(e[:3] + (tuple(sorted(map(of, e[3]))),) for e in committing)
        if awaiting:
            awaiting = tuple(e[:3] + (of(e[3]),) for e in awaiting)
        if held:
            held = tuple(e[:3] + (of(e[3]),) for e in held)
        if last:
            last = tuple(e[:3] + (of(e[3]),) for e in last)
    # Built as ``Ghost`` would build it, without its keyword machinery: each field's entries moved (and
    # sorted again) only where there are some.
    ghost = _new(Ghost, (tuple(sorted(map(at, tx_open))) if tx_open else tx_open,
                         tuple(sorted(map(at, committing))) if committing else committing,
                         tuple(sorted(map(at, awaiting))) if awaiting else awaiting,
                         believed, returned,
                         tuple(sorted(map(at, held))) if held else held,
                         counts,
                         tuple(sorted(at(e)[:2] + (conns_of[e[2]], e[3]) for e in last)) if last else last,
                         disorder,
                         tuple(sorted(map(at, prepared))) if prepared else prepared,
                         tuple(sorted(map(at, worked))) if worked else worked,
                         copies,
                         tuple(sorted((conns_of[c], m) for c, m in redo)) if redo else redo))
    return _new(type(watched), (rename(state, g), ghost))


_new = tuple.__new__
if Ghost._fields != ("tx_open", "committing", "awaiting", "believed", "returned", "held", "counts", "last", "disorder",
                     "prepared", "worked", "copies", "redo"):      # ``rename_watched`` builds a Ghost by position
    raise ImportError("rename_watched builds a Ghost of other fields: write it for the new ones")
