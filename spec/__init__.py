"""rabbitproof's executable specification of AMQP 0-9-1 acknowledgements, requeue ordering,
publisher confirms and transactions (the rules of docs/reference/rules.md), as a labelled transition system.

Pure Python, standard library only, no I/O. The interface every engine uses lives in
``spec.machine``: ``initial_states(config)``, ``enabled(state, config)``, ``step(state, action)``,
``terminal_ok(state, config)``. Properties are in ``spec.properties``, configurations in
``spec.configs``, the trace checker in ``spec.trace``.
"""
