"""`python -m compat.differential [-v]`: regenerate compat/DIFFERENTIAL.md and
compat/differential.json against a fresh Apache Kafka and a fresh pybroker."""
import sys

from compat.differential.runner import main

sys.exit(main())
