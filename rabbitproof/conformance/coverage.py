"""Coverage of the spec by a conformance run, and generation steered towards what it has not covered.

A run the spec accepts comes with the path of spec actions that explains it (``spec.trace.Verdict.path``):
those actions were exercised, and so were the rule IDs their docstrings cite (``spec.actions.rules_of``).
Rejected and other runs have no explanation, so they cover nothing. The measure is coarse on purpose:
an action class counts once exercised, whatever its parameters, and ``BrokerTakeFrame`` cites no rule,
though every method's handling goes through it.

Steering: between batches of programs, the op kinds (``programs.Op``) that lead to an action not yet
exercised get more weight (``programs.Steering``). The boost depends only on which actions the runs so
far exercised, so the programs of a run stay a function of the seed and of the broker's answers: the
default run's are the same from run to run against a broker whose accepted runs cover the same actions.
Some actions need a fault the command injects only when asked (a crash needs ``--kill-cmd``) or one it
never injects (a queue failing to take a publish, a client vanishing): no op kind leads to them.
"""
from __future__ import annotations

from collections import Counter

from rabbitproof.spec import actions as A

from rabbitproof.conformance import programs as P

ACTIONS = tuple(cls.__name__ for cls in A.all_actions())
RULES = tuple(sorted({rule for cls in A.all_actions() for rule in A.rules_of(cls)},
                     key=lambda r: (r.split("-")[0], int(r.split("-")[1]))))
_RULES_OF = {cls.__name__: A.rules_of(cls) for cls in A.all_actions()}

# What a program must send for the spec to explain its run with each action. A client action that writes
# a method is led to by the ops that send that method (both name it: ``METHOD``); the runner's own
# housekeeping adds more: it opens a channel again after a close, answers a broker's channel.close (an
# error) with close-ok, and connects again after a connection.close. Actions missing here come only from
# faults: BrokerCrash and BrokerRestart (a Crash step, with --kill-cmd), ClientVanish, NetworkLoss and
# BrokerDetect (a connection lost without a close: a crash), BrokerQueueFail (a broker that nacks a
# publish) and BrokerChannelError (`rabbitproof check`'s fault: a recorded channel error is the take of
# the method that caused it).
_SENDS = {cls.METHOD: cls.__name__ for cls in A.writes_method().values()}
_HOUSEKEEPING = {
    "ClientChannelOpen": (P.CloseChannel,), "ClientConnect": (P.CloseConnection,),
    "ClientChannelCloseOk": (P.Redeclare, P.Ack, P.Nack),
    "ClientReceive": (P.Get,), "BrokerTakeFrame": (P.Publish,), "BrokerCloseOk": (P.CloseChannel,),
    "BrokerDeliver": (P.Consume,), "BrokerRequeue": (P.Qos, P.Nack, P.Reject, P.Recover),
    "BrokerConfirm": (P.ConfirmSelect, P.Publish),
    "BrokerCommitOk": (P.TxSelect, P.TxCommit), "DiskFsync": (P.ConfirmSelect, P.TxCommit, P.Publish),
}
LEADS_TO = {name: tuple(op for op in P.Op.__args__ if _SENDS[op.METHOD] == name) + _HOUSEKEEPING.get(name, ())
            for name in ACTIONS if name in _SENDS.values() or name in _HOUSEKEEPING}
BOOST = 4                   # the weight of an op kind that leads to an action not yet exercised, times this


class Coverage:
    """The spec actions the accepted runs so far exercised (how many times each was taken)."""

    def __init__(self) -> None:
        self.taken: Counter = Counter()
        self.runs = 0

    def add(self, path: tuple) -> None:
        """Count the actions of one accepted run's explanation."""
        self.runs += 1
        self.taken.update(type(action).__name__ for action in path)

    def actions(self) -> list[str]:
        return [name for name in ACTIONS if self.taken[name]]

    def rules(self) -> list[str]:
        cited = {rule for name in self.actions() for rule in _RULES_OF[name]}
        return [rule for rule in RULES if rule in cited]

    def missing_actions(self) -> list[str]:
        return [name for name in ACTIONS if not self.taken[name]]

    def missing_rules(self) -> list[str]:
        covered = set(self.rules())
        return [rule for rule in RULES if rule not in covered]

    def report(self) -> dict:
        """The coverage as JSON: exercised and never exercised actions and rules, with totals."""
        return {"runs": self.runs,
                "actions": {"exercised": self.actions(), "never": self.missing_actions(), "total": len(ACTIONS),
                            "taken": {name: self.taken[name] for name in self.actions()}},
                "rules": {"exercised": self.rules(), "never": self.missing_rules(), "total": len(RULES)}}

    def summary(self) -> str:
        """Two lines for people: how many actions and rules, and which never."""
        acts, rules = self.actions(), self.rules()
        return (f"spec actions exercised by accepted runs: {len(acts)} of {len(ACTIONS)}; never: "
                f"{', '.join(self.missing_actions()) or 'none'}\n"
                f"rule IDs cited by those actions: {len(rules)} of {len(RULES)}; never: "
                f"{', '.join(self.missing_rules()) or 'none'}")


def steer(steering: P.Steering, coverage: Coverage) -> None:
    """Weight the op kinds that lead to an action not yet exercised by BOOST, the others by 1."""
    boosted = {kind for name in coverage.missing_actions() for kind in LEADS_TO.get(name, ())}
    steering.factors = {kind: BOOST for kind in boosted}
