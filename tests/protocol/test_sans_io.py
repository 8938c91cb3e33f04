"""`protocol` stays sans-I/O: it imports without trio and never reaches for sockets or files.

DESIGN.md: "protocol/ sans-I/O Kafka protocol: no sockets, no trio, no files", so that the
tools, the tests and a client can use it outside the broker. Checked two ways: by importing
every module in a fresh interpreter where `import trio` fails, and by reading import lines.
"""
from __future__ import annotations

import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).parents[2]
PACKAGE = ROOT / "protocol"
# Modules that mean I/O or an event loop; `io` (BytesIO) and compression modules are fine.
FORBIDDEN = {"socket", "socketserver", "ssl", "select", "selectors", "asyncio", "trio",
             "anyio", "os", "pathlib", "shutil", "tempfile", "mmap", "subprocess", "threading",
             "fcntl", "pybroker"}

_CHILD = r"""
import importlib, pkgutil, sys, uuid
sys.modules["trio"] = None          # any `import trio` now raises ImportError
import protocol
names = ["protocol"] + [m.name for m in pkgutil.walk_packages(protocol.__path__, "protocol.")]
for name in names:
    importlib.import_module(name)
assert "trio" not in {k for k, v in sys.modules.items() if v is not None}, "trio got imported"
from protocol.codec import decode_request, encode_request
frame = encode_request(3, 12, 5, "sans-io", {"topics": [{"topic_id": uuid.UUID(int=0),
                                                          "name": "t"}]})
request = decode_request(frame[4:])
assert request.header.correlation_id == 5 and request.body.topics[0].name == "t"
print(len(names))
"""


def test_imports_and_round_trips_without_trio() -> None:
    result = subprocess.run([sys.executable, "-c", _CHILD], cwd=ROOT, capture_output=True,
                            text=True, timeout=60, env={"PYTHONPATH": str(ROOT)})
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip()) >= 10


def _modules() -> list[Path]:
    return sorted(PACKAGE.rglob("*.py"))


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_io_imports(path: Path) -> None:
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names = [node.module]
        else:
            continue
        bad += [f"line {node.lineno}: {n}" for n in names if n.split(".")[0] in FORBIDDEN]
    assert not bad, f"{path.name} imports I/O modules: {bad}"


@pytest.mark.parametrize("path", _modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_no_file_access(path: Path) -> None:
    """No `open(...)`, `io.open`, `io.FileIO` and no dynamic `__import__` of anything."""
    tree = ast.parse(path.read_text(), str(path))
    bad = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Call):
            fn = node.func
            name = fn.id if isinstance(fn, ast.Name) else fn.attr if isinstance(fn, ast.Attribute) \
                else None
            if name in ("open", "FileIO", "__import__", "import_module"):
                bad.append(f"line {node.lineno}: {name}(...)")
    assert not bad, f"{path.name} reaches for files: {bad}"
