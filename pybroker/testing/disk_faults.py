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

__all__ = ["MountedDisk", "available"]

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
        """Write a filler file until the file system is full; returns the bytes it took."""
        chunk = b"\0" * (64 << 10)
        written = 0
        with open(self.path / FILLER, "ab", buffering=0) as f:
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
            raise OSError(f"e2fsck {self.device} failed ({done.returncode}): {done.stdout}")
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
        shutil.rmtree(self._work, ignore_errors=True)
