"""The protocol package stays sans-I/O, and the batch hot path stays lean."""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import protocol.records.batch


def test_records_does_not_import_trio_or_the_broker() -> None:
    code = "import sys, protocol.records; print('\\n'.join(sys.modules))"
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    loaded = set(result.stdout.split())
    assert "protocol.records.legacy" in loaded
    assert not {"trio", "asyncio", "pybroker"} & loaded


def test_batch_module_imports_only_struct_the_checksum_and_the_types_leaf() -> None:
    """The hot path never loads record or codec code, at module level or lazily: `record`
    and `compression` import `batch`, never the other way round (no import cycle)."""
    tree = ast.parse(Path(protocol.records.batch.__file__).read_text())
    imported = set()
    for node in ast.walk(tree):  # lazy imports inside functions count too
        if isinstance(node, ast.Import):
            imported |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module == "protocol.records":
            imported |= {f"protocol.records.{alias.name}" for alias in node.names}
        elif isinstance(node, ast.ImportFrom):
            imported.add(node.module)
    assert imported <= {"__future__", "struct", "collections.abc", "dataclasses", "typing",
                        "protocol.records.checksum", "protocol.records.types"}


def test_crc32c_is_loaded_at_the_first_checksum_not_at_import() -> None:
    """The crc32c package reads its distribution's metadata when imported (~15 ms of a
    broker's start): it loads at the first checksum, and from then on the C function is
    called directly."""
    code = ("import sys, protocol.records.batch, pybroker.storage.producer_state\n"
            "from protocol.records import checksum\n"
            "print('crc32c' in sys.modules, 'importlib.metadata' in sys.modules)\n"
            "first = checksum.crc32c(b'123456789')\n"
            "import crc32c\n"
            "print(hex(first), hex(checksum.crc32c(b'123456789')),"
            " checksum.crc32c is crc32c.crc32c)")
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                            check=True)
    assert result.stdout.split() == ["False", "False", "0xe3069283", "0xe3069283", "True"]
