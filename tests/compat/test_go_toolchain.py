"""bin/_go_toolchain, which bin/test sources: a Go older than compat/go's go.mod asks for
(Debian bookworm's golang-go is 1.19) is replaced on PATH by the toolchain go.mod names,
fetched once into ~/.cache/pybroker/go-toolchain/; a Go new enough is left alone.

The fetch itself (70 MB from the Go module proxy) is not run here: a cached toolchain stands
in for it, so these tests check the decision and the PATH, in milliseconds.
"""
from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "bin" / "_go_toolchain"


def _wanted() -> str:
    """The Go version compat/go asks for: its toolchain line, else its go line."""
    text = (ROOT / "compat" / "go" / "go.mod").read_text()
    found = re.search(r"^toolchain go(\S+)$", text, re.M) or re.search(r"^go (\S+)$", text, re.M)
    assert found is not None, "compat/go/go.mod names no Go version"
    return found.group(1)


def _fake_go(path: Path, version: str) -> Path:
    """A `go` that only answers `go env GOVERSION` and `go version`."""
    path.mkdir(parents=True, exist_ok=True)
    go = path / "go"
    go.write_text("#!/bin/sh\n"
                  f'if [ "$1 $2" = "env GOVERSION" ]; then echo go{version}; exit 0; fi\n'
                  f'if [ "$1" = "version" ]; then echo "go version go{version} fake"; exit 0; fi\n'
                  "exit 3\n")
    go.chmod(0o755)
    return go


def _chosen_go(tmp_path: Path, system_version: str) -> tuple[str, str]:
    """Which `go` is on PATH after sourcing the script, and what it printed to stderr."""
    system = _fake_go(tmp_path / "system", system_version)
    done = subprocess.run(
        ["bash", "-c", f'set -e; PYBROKER_HOME="{ROOT}"; source "{SCRIPT}"; command -v go'],
        env={"PATH": f"{system.parent}:/usr/bin:/bin", "HOME": str(tmp_path),
             "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip(), done.stderr


def test_an_old_go_gives_way_to_the_cached_toolchain(tmp_path: Path) -> None:
    want = _wanted()
    cached = _fake_go(tmp_path / "cache" / "pybroker" / "go-toolchain" / f"go{want}" / "bin",
                      want)
    chosen, said = _chosen_go(tmp_path, "1.19.8")
    assert chosen == str(cached)
    assert f"go version go{want}" in said


def test_a_go_new_enough_is_left_alone(tmp_path: Path) -> None:
    want = _wanted()
    for version in (want, "99.0.0"):
        chosen, said = _chosen_go(tmp_path / version, version)
        assert chosen == str(tmp_path / version / "system" / "go"), version
        assert said == ""


def test_an_old_go_without_a_cache_fetches_the_toolchain_module(tmp_path: Path) -> None:
    """The fetch asks the old go for golang.org/toolchain at go.mod's version (here the fake
    go refuses, so the script fails instead of going on with a Go that cannot build)."""
    want = _wanted()
    system = _fake_go(tmp_path / "system", "1.19.8")
    log = tmp_path / "calls"
    system.write_text(system.read_text().replace(
        "exit 3\n", f'echo "$@" >> "{log}"\n'
        'if [ "$1 $2" = "env GOOS" ]; then echo linux; exit 0; fi\n'
        'if [ "$1 $2" = "env GOARCH" ]; then echo amd64; exit 0; fi\n'
        "exit 3\n"))
    done = subprocess.run(
        ["bash", "-c", f'set -e; PYBROKER_HOME="{ROOT}"; source "{SCRIPT}"; echo went on'],
        env={"PATH": f"{system.parent}:/usr/bin:/bin", "HOME": str(tmp_path),
             "XDG_CACHE_HOME": str(tmp_path / "cache")},
        capture_output=True, text=True, timeout=30)
    assert done.returncode != 0 and "went on" not in done.stdout
    assert f"mod download -json golang.org/toolchain@v0.0.1-go{want}.linux-amd64" in \
        log.read_text()
