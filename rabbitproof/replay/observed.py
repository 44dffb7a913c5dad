"""What the applications of a replay believe and do, kept as the real run goes (the replay's own
counterpart of the observer of `check`, rabbitproof.check.observer), and whether it shows the answer's event.

A publisher believes a message delivered when its publish is written (no confirms, no transaction), when the
broker's basic.ack covers it (confirm mode) or when the commit holding it is answered; a consumer processes a
message when it receives it (automatic acks), when it acknowledges it, or at its work step when it works
before the ack. What is left in the queues at the end is read by the replay once its clients are gone."""
from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from rabbitproof.replay.naming import message_order

AUTOMATIC, AT_ACK, BEFORE_ACK = "automatic", "at-ack", "before-ack"
LOOP_ROUNDS = 3         # a requeue loop is shown going round this many times


@dataclass
class Observed:
    """The applications' side of one try. A channel is keyed (client, connection number, channel)."""

    processing: dict                                    # client -> AUTOMATIC / AT_ACK / BEFORE_ACK (consumers)
    believed: set = field(default_factory=set)
    processed: Counter = field(default_factory=Counter)
    handed_out: Counter = field(default_factory=Counter)
    received: dict = field(default_factory=dict)        # channel -> messages the application took, in order
    arrived: dict = field(default_factory=dict)         # channel -> messages that reached the client, in order
    modes: dict = field(default_factory=dict)           # channel -> "confirm" / "tx"
    published: dict = field(default_factory=dict)       # channel -> count of publishes in confirm mode
    awaiting: dict = field(default_factory=dict)        # channel -> {seq: msg} unconfirmed
    in_tx: dict = field(default_factory=dict)           # channel -> msgs published since the last commit
    committing: dict = field(default_factory=dict)      # channel -> [msgs of each commit not yet answered]
    held: dict = field(default_factory=dict)            # channel -> {real tag: msg} deliveries held
    left: set = field(default_factory=set)              # messages left in the queues at the end
    open_channels: set = field(default_factory=set)     # channels still open when the acts ended
    copies: dict = field(default_factory=dict)          # a republished message -> the message it publishes again

    def original(self, msg: str) -> str:
        """The message ``msg`` publishes again (itself when it is no republish): the questions count per
        message, whichever of its publishes a copy came from."""
        return self.copies.get(msg, msg)

    def select(self, key: tuple, mode: str) -> None:
        self.modes[key] = mode
        self.published[key] = 0

    def publish(self, key: tuple, msg: str, again: str = "") -> None:
        if again:
            self.copies[msg] = self.original(again)
        msg = self.original(msg)
        mode = self.modes.get(key)
        if mode == "confirm":
            self.published[key] += 1
            self.awaiting.setdefault(key, {})[self.published[key]] = msg
        elif mode == "tx":
            self.in_tx.setdefault(key, []).append(msg)
        else:
            self.believed.add(msg)

    def confirmed(self, key: tuple, tag: int, multiple: bool, ack: bool) -> None:
        waiting = self.awaiting.get(key, {})
        for seq in [s for s in waiting if (s <= tag if multiple else s == tag)]:
            msg = waiting.pop(seq)
            if ack:
                self.believed.add(msg)

    def commit(self, key: tuple) -> None:
        self.committing.setdefault(key, []).append(self.in_tx.pop(key, []))

    def commit_ok(self, key: tuple) -> None:
        if self.committing.get(key):
            self.believed.update(self.committing[key].pop(0))

    def receive(self, key: tuple, msg: str, tag: int) -> None:
        msg = self.original(msg)
        self.received.setdefault(key, []).append(msg)
        self.handed_out[msg] += 1
        if self.processing.get(key[0]) == AUTOMATIC:
            self.processed[msg] += 1
        else:
            self.held.setdefault(key, {})[tag] = msg

    def settle(self, key: tuple, tag: int, multiple: bool, ack: bool) -> None:
        held = self.held.get(key, {})
        for t in sorted(t for t in held if (t <= tag if multiple and tag else (multiple or t == tag))):
            msg = held.pop(t)
            if ack and self.processing.get(key[0]) == AT_ACK:
                self.processed[msg] += 1

    def work(self, key: tuple, tag: int) -> None:
        msg = self.held.get(key, {}).get(tag)
        if msg is not None:
            self.processed[msg] += 1

    # -- the answer's event, on the real run -------------------------------------------------------

    def shows(self, question: str) -> tuple[bool, str]:
        """Whether the run shows question ``question``'s event, and what it showed (or why not)."""
        return {"lost": self._lost, "twice": self._twice, "order": self._order, "loop": self._loop,
                "waits": self._waits}[question]()

    def _lost(self) -> tuple[bool, str]:
        left = {self.original(m) for m in self.left}
        gone = sorted(m for m in self.believed if not self.processed[m] and m not in left)
        if gone:
            return True, f"{', '.join(gone)}: believed delivered by its publisher, never processed, not in its queue"
        return False, ("no message believed delivered is gone" if self.believed
                       else "no message was believed delivered")

    def _twice(self) -> tuple[bool, str]:
        twice = sorted(m for m, n in self.processed.items() if n >= 2)
        if twice:
            return True, f"{', '.join(twice)}: processed {max(self.processed[m] for m in twice)} times"
        return False, "no message was processed twice"

    def _order(self) -> tuple[bool, str]:
        """Judged on the order the deliveries reached the client, whatever order the application took them in."""
        for key, msgs in self.arrived.items():
            latest: dict[int, tuple[int, str]] = {}
            for msg in map(self.original, msgs):
                publisher, n = message_order(msg)
                if publisher in latest and n < latest[publisher][0]:
                    return True, f"c{key[0]} received {msg} after {latest[publisher][1]}"
                if n > latest.get(publisher, (0, ""))[0]:
                    latest[publisher] = (n, msg)
        return False, "every consumer received each publisher's messages in order"

    def _loop(self) -> tuple[bool, str]:
        for msg, n in self.handed_out.most_common():
            if n >= LOOP_ROUNDS + 1 and not self.processed[msg]:
                return True, f"{msg}: handed out {n} times, never processed"
        return False, f"no message was handed out {LOOP_ROUNDS + 1} times without being processed"

    def _waits(self) -> tuple[bool, str]:
        for key, waiting in self.awaiting.items():
            if waiting and key in self.open_channels:
                return True, f"c{key[0]}.ch{key[2]}: {', '.join(sorted(waiting.values()))} never answered"
        for key, commits in self.committing.items():
            if commits and key in self.open_channels:
                return True, f"c{key[0]}.ch{key[2]}: a tx.commit never answered"
        return False, "every publish was answered"
