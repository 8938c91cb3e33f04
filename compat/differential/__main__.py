"""`python -m compat.differential [-v] [--share]`: regenerate compat/DIFFERENTIAL.md and
compat/differential.json against a fresh Apache Kafka and a fresh pybroker (`--share`: only
the share-group client scenarios, into the recorded report)."""
import sys

from compat.differential.runner import main

sys.exit(main())
