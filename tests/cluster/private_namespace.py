"""A private namespace for a test that types a quickstart as written: its fixed ports (ZooKeeper
on 2181, brokers on 9092-9094) and its fixed data directories under /tmp, without touching this
machine's. The run gets a private network (only its loopback), a private /tmp (a directory of
the test bound over it) and private process ids, so that `ps aux | grep server-1.properties`
sees this run's brokers and no one else's.

`run_inside(module, tmp_path)` runs `python -m module WORKDIR` inside such a namespace; the
module's part inside prints one JSON line last, which the test reads.
"""
from __future__ import annotations

import os
import shlex
import shutil
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

from pybroker.testing.zookeeper import four_letter_word
from tests.helpers import ROOT, venv_not_ready


# `--propagation slave`, not unshare's default `private`: the new namespace copies every mount
# there is, a disk-fault test's ext4 disk on the other worker included, and a private copy
# kept that disk's device busy until this test ended, so the other test's unmount-and-e2fsck
# repair failed ("/dev/loop5 is in use", CI 2026-12-05). As a slave of the disk kit's shared
# mount (pybroker/testing/disk_faults.py) the copy goes when the host unmounts the disk, and
# nothing mounted in here goes back to the host.
UNSHARE = ("unshare", "--map-root-user", "--net", "--mount", "--propagation", "slave", "--pid",
           "--fork", "--mount-proc")


def why_no_private_namespace() -> str | None:
    # The steps run bin/ scripts inside a namespace with no network: they must not need to
    # install anything first.
    unready = venv_not_ready()
    if unready is not None:
        return unready
    for tool in ("unshare", "ip", "ps"):
        if shutil.which(tool) is None:
            return f"the cluster quickstart needs {tool} on PATH (a private namespace)"
    probe = subprocess.run([*UNSHARE, "true"], capture_output=True, text=True, timeout=30)
    if probe.returncode != 0:
        return ("the cluster quickstart needs private network, mount and pid namespaces to own "
                "ports 2181 and 9092-9094 and /tmp/zookeeper without touching this machine's; "
                f"unshare said: {probe.stderr.strip()}")
    home = Path(os.environ.get("ZOOKEEPER_HOME", "/usr/share/zookeeper"))  # as bin/_zookeeper
    if not (home / "bin" / "zkEnv.sh").exists():
        return f"zookeeper is not installed (no {home}/bin/zkEnv.sh; bin/test installs it)"
    return None


def wait_serving(what: str, proc: subprocess.Popen[bytes], ready: Callable[[], bool],
                  timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise RuntimeError(f"{what} exited with {proc.returncode}")
        if ready():
            return
        time.sleep(0.1)
    raise RuntimeError(f"{what} was not serving after {timeout} s")


def zookeeper_serving() -> bool:
    try:
        return "Mode: " in four_letter_word("127.0.0.1", 2181, "srvr")
    except OSError:
        return False


def bin_env() -> dict[str, str]:
    """The bin/ scripts run with this test's Python environment (bin/_bootstrap's
    PYBROKER_VENV) when it is a venv, and import this checkout's pybroker."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    # A shell keeps its terminal's size unexported; pytest-xdist's workers export COLUMNS=80
    # and LINES=24, which `ps aux` obeys, cutting the commands that `ps aux | grep` looks for.
    for sized in ("COLUMNS", "LINES"):
        env.pop(sized, None)
    if sys.prefix != sys.base_prefix:
        env.setdefault("PYBROKER_VENV", sys.prefix)
    return env


def needed_under_tmp() -> list[Path]:
    """The checkout and this Python, where they live under /tmp (a fresh clone in CI): the
    namespace's private /tmp would hide them, so they are bound back in at the same paths."""
    tmp = Path("/tmp")
    wanted = {ROOT, Path(sys.prefix), Path(sys.base_prefix), Path(sys.executable).parent}
    found = sorted({p.resolve() for p in wanted if p.resolve().is_relative_to(tmp)})
    # Outermost first, and nothing inside another already bound.
    return [p for p in found if not any(p != q and p.is_relative_to(q) for q in found)]


SERVER_COMMANDS = ("bin/zookeeper-server-start.sh", "bin/kafka-server-start.sh")


def start_server(command: str, log: Path) -> subprocess.Popen[bytes]:
    """A quickstart's server command in the background (its own "terminal"), its output in
    `log`; returns once it serves (ZooKeeper answers, or the broker logs "listening on"), or
    raises RuntimeError with the end of its output. The caller kills it."""
    with log.open("wb") as out:  # the child keeps its own descriptor
        proc = subprocess.Popen(shlex.split(command), cwd=ROOT, stdin=subprocess.DEVNULL,
                                stdout=out, stderr=subprocess.STDOUT)
    try:
        wait_serving(command, proc, zookeeper_serving if "zookeeper" in command
                     else lambda: b"listening on" in log.read_bytes())
    except RuntimeError as exc:
        proc.kill()
        tail = log.read_bytes()[-3000:].decode(errors="replace")
        raise RuntimeError(f"{exc}; its output ends:\n{tail}") from None
    return proc


def run_inside(module: str, tmp_path: Path, timeout: float,
               binds: dict[Path, Path] | None = None) -> subprocess.CompletedProcess[str]:
    """`python -m module tmp_path/work` in a private namespace; `binds` (host path -> the
    path it is bound over inside, e.g. a scratch copy of config/ over the checkout's) are
    mounted first."""
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir()
    # /tmp is bound with its submounts (--rbind): a plain --bind of a tree that has mounts
    # inside it (a disk-fault test's ext4 or tmpfs under /tmp, running on the other worker)
    # is refused in a user namespace (EINVAL, "wrong fs type"), as it would uncover what
    # those mounts hide.
    inside = (f'ip link set lo up && mkdir -p {private_tmp}/.host '
              f'&& mount --rbind /tmp {private_tmp}/.host && mount --rbind {private_tmp} /tmp'
              + "".join(f' && mkdir -p {shlex.quote(str(p))} && mount --bind '
                        f'{shlex.quote("/tmp/.host/" + str(p.relative_to("/tmp")))} '
                        f'{shlex.quote(str(p))}' for p in needed_under_tmp())
              + "".join(f' && mount --bind {shlex.quote(_seen_inside(src))} '
                        f'{shlex.quote(str(dst))}' for src, dst in (binds or {}).items())
              + ' && exec "$@"')
    return subprocess.run(
        [*UNSHARE, "sh", "-c", inside, "sh", sys.executable, "-m", module, str(tmp_path / "work")],
        capture_output=True, text=True, timeout=timeout, cwd=ROOT, env=bin_env())


def _seen_inside(path: Path) -> str:
    """Where a host path is once the private /tmp covers /tmp: under /tmp/.host."""
    resolved = path.resolve()
    if resolved.is_relative_to("/tmp"):
        return "/tmp/.host/" + str(resolved.relative_to("/tmp"))
    return str(resolved)
