"""Recording what a broker does: the raw AMQP client that records every frame (rawclient.py), recorded
scenarios per rule family (scenarios.py), readers for frame-by-frame comparison (wire.py), recording
files (file.py) and `rabbitproof trace FILE` (command.py)."""
