"""``python -m rabbitproof``: the same as the `rabbitproof` command."""
from rabbitproof.cli import console_main

console_main()
