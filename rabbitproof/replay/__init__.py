"""Replaying `rabbitproof check`'s executions on a real broker: real clients act out an answer's client
steps in its order, real faults are made at its fault steps, and the recorded run is judged by the spec
(reproduced, not reproduced within the tries, diverged). docs/how-to/replay.md says how each fault is made."""
