"""Real file systems for a log dir that fails or fills (issue #32): a test mounts a small one,
points `log.dirs` at it, then breaks it.

- `MountedDisk.tmpfs(size)`: a tmpfs of a few MB. `fill()` writes a filler file until ENOSPC,
  so the broker's next write fails as it would on a full disk; `free()` removes it.
- `MountedDisk.ext4(size)`: ext4 on a loop device over a sparse file. Besides filling, `fail()`
  has the kernel take the file system down as it does on a disk error (ext4's
  `trigger_fs_error` with `errors=remount-ro`): every later write there fails with EROFS.
  `repair()` (after the broker let go of its files) unmounts, runs `e2fsck`, and mounts it
  again, as an operator would. A plain `mount -o remount,ro` cannot stand in: Linux refuses
  it (EBUSY) while the broker holds files open for writing.

`DiskFaults` holds such disks for the brokers of a subprocess cluster, by broker and name: a
test mounts one (`mount(broker, name)`), puts the log dir it returns in that broker's
`log.dirs`, and breaks it with the fault verbs `fill_disk(broker, name)` and
`fail_disk(broker, name)`, then `free_disk` or, with the broker stopped, `repair_disk`. That
log dir is inside the disk (`<mount point>/<name>`), as a machine's log dirs are on its disks:
a node's worker K keeps its copy of each configured dir at `<dir>-K`, a sibling
(pybroker.node.worker), so a dir that were the mount point itself would leave workers 1..N-1
on the parent file system, off the disk the test breaks.

Both need root (mount, losetup); `available()` says whether this machine can, so a suite skips
rather than fails elsewhere. `close()` unmounts and detaches everything, whatever happened.
"""
from __future__ import annotations

import errno
import os
import shutil
import subprocess
import tempfile
from pathlib import Path

__all__ = ["DiskFaults", "MountedDisk", "available"]

FILLER = ".pybroker-test-filler"


def _run(*argv: str) -> str:
    done = subprocess.run(argv, capture_output=True, text=True, timeout=60)
    if done.returncode != 0:
        raise OSError(f"{' '.join(argv)} failed ({done.returncode}): "
                      f"{done.stderr.strip() or done.stdout.strip()}")
    return done.stdout.strip()


def available(kind: str = "tmpfs") -> str | None:
    """None if a `kind` disk ("tmpfs" or "ext4") can be mounted here, else why not."""
    if os.geteuid() != 0:
        return "mounting a file system needs root"
    if shutil.which("mount") is None:
        return "no mount(8)"
    if kind == "ext4":
        for tool in ("losetup", "mkfs.ext4", "e2fsck"):
            if shutil.which(tool) is None:
                return f"no {tool}"
        if not Path("/dev/loop-control").exists():
            return "no loop devices (/dev/loop-control)"
    return None


class MountedDisk:
    """A small file system mounted at `path` (a fresh directory); see the module docstring."""

    def __init__(self, kind: str, size_mb: int) -> None:
        self.kind = kind
        self.size_mb = size_mb
        self._work = Path(tempfile.mkdtemp(prefix=f"pybroker-{kind}-"))
        self.path = self._work / "mnt"
        self.path.mkdir()
        self.device: str | None = None
        self._image = self._work / "disk.img"
        self.mounted = False
        # The disk is mounted under a shared bind mount of the working dir. A mount
        # namespace made while it is mounted (`ip netns exec` makes one for every process it
        # runs, a slave copy of this one) then holds a slave copy of it, which the unmount
        # here removes too: with the private mounts a container starts with, that copy
        # would keep the device busy, and `repair` could not check it.
        self._bound = False
        try:
            _run("mount", "--bind", str(self._work), str(self._work))
            self._bound = True
            _run("mount", "--make-shared", str(self._work))
        except BaseException:
            self.close()
            raise

    @classmethod
    def tmpfs(cls, size_mb: int = 4) -> MountedDisk:
        disk = cls("tmpfs", size_mb)
        try:
            _run("mount", "-t", "tmpfs", "-o", f"size={size_mb}m", "tmpfs", str(disk.path))
            disk.mounted = True
        except BaseException:
            disk.close()
            raise
        return disk

    @classmethod
    def ext4(cls, size_mb: int = 32) -> MountedDisk:
        disk = cls("ext4", size_mb)
        try:
            with open(disk._image, "wb") as f:
                f.truncate(size_mb << 20)
            disk.device = _run("losetup", "--find", "--show", str(disk._image))
            # No blocks reserved for root: the broker runs as root and must see ENOSPC when
            # the test fills the disk.
            _run("mkfs.ext4", "-q", "-F", "-m", "0", disk.device)
            disk._mount()
        except BaseException:
            disk.close()
            raise
        return disk

    def _mount(self) -> None:
        assert self.device is not None
        _run("mount", "-o", "errors=remount-ro", self.device, str(self.path))
        self.mounted = True

    def __enter__(self) -> MountedDisk:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- faults ---------------------------------------------------------------------------------
    def fill(self) -> int:
        """Write a filler file until the file system is full; returns the bytes it took.

        In ever smaller chunks: ext4 refuses a 64 KB write while tens of KB are still free
        (it reserves for a delayed allocation's worst case), which a broker appending small
        batches took seconds to use up before meeting ENOSPC."""
        written = 0
        with open(self.path / FILLER, "ab", buffering=0) as f:
            for size in (64 << 10, 4096, 512, 1):
                chunk = b"\0" * size
                while True:
                    try:
                        n = f.write(chunk)
                    except OSError as exc:
                        if exc.errno != errno.ENOSPC:
                            raise
                        break
                    written += n or 0
                    if not n:
                        break
            # ext4 allocates at writeback: sync so the space is really gone now.
            try:
                os.fsync(f.fileno())
            except OSError as exc:
                if exc.errno != errno.ENOSPC:
                    raise
        return written

    def free(self) -> None:
        """Remove the filler file (`fill`)."""
        (self.path / FILLER).unlink(missing_ok=True)

    def fail(self) -> None:
        """ext4 only: the kernel records a file system error and remounts it read-only, as
        on an I/O error from the disk; every later write fails with EROFS."""
        if self.kind != "ext4" or self.device is None:
            raise ValueError("fail() needs an ext4 disk")
        name = os.path.basename(os.path.realpath(self.device))
        with open(f"/sys/fs/ext4/{name}/trigger_fs_error", "w") as f:
            f.write("pybroker test: disk failure\n")

    def repair(self) -> None:
        """ext4 only: unmount, check and mount again (nothing may hold files there)."""
        if self.kind != "ext4" or self.device is None:
            raise ValueError("repair() needs an ext4 disk")
        _run("umount", str(self.path))
        self.mounted = False
        done = subprocess.run(["e2fsck", "-f", "-y", self.device], capture_output=True,
                              text=True, timeout=120)
        if done.returncode not in (0, 1):  # 1: errors corrected
            raise OSError(f"e2fsck {self.device} failed ({done.returncode}): "
                          f"{done.stdout}{done.stderr}")
        self._mount()

    # -- cleanup --------------------------------------------------------------------------------
    def close(self) -> None:
        """Unmount (lazily, should a process still hold files), detach the loop device and
        remove the working directory."""
        if self.mounted:
            subprocess.run(["umount", "-l", str(self.path)], capture_output=True, timeout=60)
            self.mounted = False
        if self.device is not None:
            subprocess.run(["losetup", "-d", self.device], capture_output=True, timeout=60)
            self.device = None
        if self._bound:
            subprocess.run(["umount", "-l", str(self._work)], capture_output=True, timeout=60)
            self._bound = False
        shutil.rmtree(self._work, ignore_errors=True)


class DiskFaults:
    """The disks of a subprocess cluster's brokers and the verbs that break them (issue #32's
    fault kit); see the module docstring. Usable as a context manager."""

    def __init__(self) -> None:
        self.disks: dict[tuple[int, str], MountedDisk] = {}

    def mount(self, broker: int, name: str, *, kind: str = "ext4", size_mb: int = 32) -> Path:
        """A fresh `kind` disk for `broker`, called `name`; returns the log dir on it for the
        broker's `log.dirs`: `<mount point>/<name>`, so that every worker of a node has its
        copy of the dir on the disk too (see the module docstring)."""
        if (broker, name) in self.disks:
            raise ValueError(f"broker {broker} already has a disk {name!r}")
        disk = MountedDisk.ext4(size_mb) if kind == "ext4" else MountedDisk.tmpfs(size_mb)
        self.disks[(broker, name)] = disk
        log_dir = disk.path / name
        log_dir.mkdir()
        return log_dir

    def holding(self, path: Path) -> tuple[int, str] | None:
        """The (broker, name) of the disk that `path` is on, or None: on none of them."""
        return next((key for key, disk in self.disks.items()
                     if path == disk.path or disk.path in path.parents), None)

    def disk(self, broker: int, name: str) -> MountedDisk:
        return self.disks[(broker, name)]

    def fill_disk(self, broker: int, name: str) -> int:
        """Fill the disk: the broker's next write there fails with ENOSPC."""
        return self.disk(broker, name).fill()

    def fail_disk(self, broker: int, name: str) -> None:
        """Fail the disk as an I/O error does (ext4 only): every later write fails (EROFS)."""
        self.disk(broker, name).fail()

    def free_disk(self, broker: int, name: str) -> None:
        self.disk(broker, name).free()

    def repair_disk(self, broker: int, name: str) -> None:
        """Unmount, fsck and mount again; the broker must be stopped."""
        self.disk(broker, name).repair()

    def __enter__(self) -> DiskFaults:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        for disk in self.disks.values():
            disk.close()
        self.disks.clear()
