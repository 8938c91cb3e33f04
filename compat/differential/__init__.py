"""Differential conformance (issue #15 §2): the same request sequences sent to Apache Kafka
and to pybroker, started fresh with the same settings, their answers compared field by field.

Our own code throughout: the corpus (`corpus.py`, `sequences.py`) is written from the
declarations in `protocol/`, the targets (`target.py`) speak the wire through
`protocol.codec`, `normalise.py` says what legitimately differs between two brokers and is
masked before comparing, `deliberate.py` lists the differences pybroker keeps on purpose
with their reasons, and `runner.py` runs everything and writes `compat/DIFFERENTIAL.md` and
`compat/differential.json` (`python -m compat.differential` regenerates both).
"""
