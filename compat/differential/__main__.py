"""`python -m compat.differential [-v] [--clients-only | --no-clients | --share]`: regenerate
compat/DIFFERENTIAL.md and compat/differential.json against a fresh Apache Kafka and a fresh
pybroker (runner.main says what the flags keep)."""
import sys

from compat.differential.runner import main

sys.exit(main())
