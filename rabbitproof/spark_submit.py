"""The `rabbitproof` command as a file, for ``spark-submit`` (which runs a file rather than a module):

    spark-submit --master spark://HOST:7077 rabbitproof/spark_submit.py explore large --engine spark

Spark's master and settings then come from spark-submit; the arguments are those of `rabbitproof`, which
must be installed in the driver's Python (`pip install '.[spark]'`).
"""
import sys

from rabbitproof.cli import main

sys.exit(main())
