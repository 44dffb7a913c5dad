"""Proofs over the Z3 model (inductive invariants, bounded search for hazards), the CrossHair contract
check over ``spec/``, and ``python -m rabbitproof.verify``, which runs every part of ``make verify``."""
