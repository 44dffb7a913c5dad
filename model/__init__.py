"""The Z3 model: the spec's transition system as one Z3 relation per action, over an abstraction of the
spec state for unbounded sizes (``model.state``), and the check that it agrees with ``spec/``
(``model.agreement``). ``proofs/`` proves the invariants with it.
"""
