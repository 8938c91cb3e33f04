"""pybroker: a Kafka-wire-compatible message broker written in Python."""

# The one place the version is written: pyproject.toml reads it from here (dynamic version),
# so the package metadata, `--version` of the server and tools, and the client's
# ApiVersions software version cannot disagree.
__version__ = "0.1.0"

# What `--version` prints on the server and every tool: the version first, as Kafka's tools
# print theirs, then whose version it is (a Kafka user's scripts may read the first word).
VERSION_LINE = f"{__version__} (pybroker)"
