"""The quickstart tests' private namespace beside the disk-fault kit: a namespace made while
another test's ext4 disk is mounted must not keep that disk busy, or the other test's repair
(unmount, e2fsck, mount) fails, as it did when the two ran on the two workers at once."""
from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from pybroker.testing.disk_faults import MountedDisk, available
from tests.cluster.private_namespace import UNSHARE, why_no_private_namespace


def test_a_disk_mounted_before_a_private_namespace_can_still_be_repaired(
        tmp_path: Path) -> None:
    why = available("ext4") or why_no_private_namespace()
    if why:
        pytest.skip(why)
    ready = tmp_path / "ready"
    with MountedDisk.ext4() as disk:
        # as run_inside does: /tmp bound again with its submounts (the disk among them)
        inside = (f"mkdir -p {tmp_path}/tmp/.host && mount --rbind /tmp {tmp_path}/tmp/.host "
                  f"&& touch {ready} && sleep 60")
        holder = subprocess.Popen([*UNSHARE, "sh", "-c", inside])
        try:
            deadline = time.monotonic() + 30
            while not ready.exists():
                assert holder.poll() is None and time.monotonic() < deadline, \
                    "the namespace did not come up"
                time.sleep(0.05)
            disk.repair()  # OSError "... is in use" when the namespace holds a copy
            assert disk.mounted
        finally:
            holder.kill()
            holder.wait(10)
