"""A frame fuzzer for AMQP 0-9-1 brokers (`rabbitproof bench fuzz`).

- `cases.py`: the seeded mutator: valid frames built with pamqp, broken in one of many ways, each case
  with the replies AMQP 0-9-1 allows for it;
- `wire.py`: a lean client on a blocking socket (handshake, frames out, one reply judged);
- `campaign.py`: many connections of cases against one broker, with a clean pika round trip every few
  hundred connections, durable messages counted before and after, and the broker's log read for errors.
"""
