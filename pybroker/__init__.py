"""pybroker: a Kafka-wire-compatible message broker written in Python."""
import os as _os

# The one place the version is written: pyproject.toml reads it from here (dynamic version),
# so the package metadata, `--version` of the server and tools, and the client's
# ApiVersions software version cannot disagree.
__version__ = "0.1.0"

# What `--version` prints on the server and every tool: the version first, as Kafka's tools
# print theirs, then whose version it is (a Kafka user's scripts may read the first word).
VERSION_LINE = f"{__version__} (pybroker)"

# PYBROKER_STRICT_ENCODE=1 (tests/conftest.py sets it; the brokers and tools a test starts as
# processes inherit it): everything this process encodes refuses a key its schema declares in
# no version (protocol/schema.py), so a misspelt field fails a test instead of going out as its
# default. Read here, at import, before anything is encoded; unset, nothing is checked.
if _os.environ.get("PYBROKER_STRICT_ENCODE") == "1":
    from protocol.schema import strict_encoding as _strict_encoding
    _strict_encoding()
