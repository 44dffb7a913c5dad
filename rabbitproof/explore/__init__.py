"""`rabbitproof explore` and `rabbitproof list` (command.py), how a result reads (report.py: progress
line, tables, traces, JSON; chart.py: message-sequence charts), the standard configurations explored by
`make verify` (standard.py) and the counts pinned for them (manifest.py, manifest.json)."""
