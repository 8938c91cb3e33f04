"""The compatibility suite: the same scenarios through every client, as a client x scenario matrix.

`python -m compat.run [--write]` starts one broker, runs every (client, scenario) in its own
worker process with a timeout, prints the matrix and, with --write, stores it in
`compat/MATRIX.md` and `compat/matrix.json`. `tests/compat/test_matrix.py` reruns it and fails
on any cell that the committed matrix.json says PASS and that no longer passes.

- `compat/base.py` — what a client adapter offers (`Adapter`), records (`Rec`, `Got`), and the
  two outcomes a scenario can end with besides passing: `NotApplicable` and an exception.
- `compat/clients/` — one module per client, each defining `ADAPTER`.
- `compat/scenarios.py` — the scenarios, each a function `(adapter, bootstrap) -> None`.
- `compat/wire.py` — raw Kafka requests over `protocol/`, the neutral ground the scenarios use
  to set up topics and records and to check what the broker really holds.
- `compat/apache_kafka.py` — Apache Kafka itself as the reference broker (issue #15), fetched
  with Maven from the pinned `compat/apache-kafka/pom.xml`; `tests/reference/` uses it.
"""
