"""``python -m spark_check``: see spark_check.cli."""
import sys

from .cli import main

sys.exit(main())
