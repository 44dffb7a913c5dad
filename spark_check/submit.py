"""Entry point for ``spark-submit``, which runs a file rather than a module:

    PYTHONPATH=. spark-submit --master spark://HOST:7077 spark_check/submit.py explore large --engine spark

Spark's master and settings then come from spark-submit; the arguments are those of ``python -m spark_check``.
"""
import sys

from spark_check.cli import main

sys.exit(main())
