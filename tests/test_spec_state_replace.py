"""The spec's quick ``_replace`` (spec.state._quick_replace) gives what the standard NamedTuple one gives,
for every state class, every field and every pair of fields, and refuses a name that is not a field
with the same ValueError."""
from __future__ import annotations

import itertools

import pytest

from rabbitproof.spec import state as S

CLASSES = (S.Entry, S.Queue, S.Unacked, S.Consumer, S.Pending, S.Channel, S.ClientChannel, S.Conn, S.Used,
           S.State)


def standard(value, **changes):
    """What ``typing.NamedTuple``'s own ``_replace`` returns (collections.namedtuple's code)."""
    cls = type(value)
    made = tuple.__new__(cls, map(changes.pop, cls._fields, value))
    assert not changes
    return made


def sample(cls):
    """An instance whose fields all differ: field i holds ("old", i)."""
    return tuple.__new__(cls, [("old", i) for i in range(len(cls._fields))])


@pytest.mark.parametrize("cls", CLASSES, ids=lambda c: c.__name__)
def test_one_field_and_every_pair_as_the_standard_replace(cls):
    value = sample(cls)
    assert "_quick_replace" in cls._replace.__qualname__
    for name in cls._fields:
        got = value._replace(**{name: "new"})
        assert type(got) is cls
        assert got == standard(value, **{name: "new"})
        assert getattr(got, name) == "new"
    for a, b in itertools.combinations(cls._fields, 2):
        got = value._replace(**{a: 1, b: 2})
        assert type(got) is cls and got == standard(value, **{a: 1, b: 2})
    assert value._replace() == value and type(value._replace()) is cls


@pytest.mark.parametrize("changes", [{"nope": 1}, {"status": 1, "nope": 1}, {"nope": 1, "status": 1}])
def test_a_name_that_is_no_field_is_refused_by_name(changes):
    with pytest.raises(ValueError, match="unexpected field names: \\['nope'\\]"):
        S.NEW_CHANNEL._replace(**changes)


def test_every_state_class_has_it():
    defined = {v for v in vars(S).values() if isinstance(v, type) and issubclass(v, tuple) and hasattr(v, "_fields")
               and v.__module__ == S.__name__}
    assert defined == set(CLASSES)


def test_the_channels_the_module_builds_with_it():
    assert S.CLOSED_CHANNEL == S.NEW_CHANNEL[:0] + (S.CH_CLOSED,) + S.NEW_CHANNEL[1:]
    assert S.CLOSED_CLIENT.status == S.C_CLOSED and S.CLOSED_CLIENT[1:] == S.NEW_CLIENT[1:]
