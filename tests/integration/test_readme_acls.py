"""The README's ACL example, run as written: its properties on a broker, its kafka-acls lines
(`bin/kafka-acls.sh` run as the module it wraps, `localhost:9092` as the test broker's
address), and the `--list` output it shows."""
from __future__ import annotations

import re
import shlex
import subprocess
import sys

import pytest

from tests.helpers import ROOT, Broker

README = ROOT / "README.md"


def _blocks() -> dict[str, list[str]]:
    text = README.read_text()
    part = text.split("<!-- acls:begin -->", 1)[1].split("<!-- acls:end -->", 1)[0]
    blocks: dict[str, list[str]] = {}
    for kind, body in re.findall(r"^```(\w+)\n(.*?)^```$", part, flags=re.M | re.S):
        blocks.setdefault(kind, []).append(body)
    return blocks


@pytest.mark.in_process(
    "reads the authorizer's bindings (the README's broker grants ANONYMOUS no DescribeAcls)")
def test_readme_acl_example(tmp_path):
    blocks = _blocks()
    (properties,), (commands,), (shown,) = blocks["properties"], blocks["sh"], blocks["text"]
    config = dict(line.split("=", 1) for line in properties.splitlines() if line.strip())
    assert config["authorizer.class.name"] == "kafka.security.authorizer.AclAuthorizer"
    with Broker(log_dir=tmp_path, **{k.replace(".", "_"): v for k, v in config.items()}) as b:
        outputs = []
        for line in commands.splitlines():
            argv = shlex.split(line.replace("localhost:9092", b.bootstrap))
            assert argv[0] == "bin/kafka-acls.sh"
            done = subprocess.run([sys.executable, "-m", "pybroker.tools.acls", *argv[1:]],
                                  capture_output=True, text=True, timeout=60, cwd=ROOT)
            assert done.returncode == 0, (line, done.stderr)
            outputs.append(done.stdout)
        assert outputs[-1].strip() == shown.strip()
        acls = b.server_info.broker.authorizer.bindings
        assert {(x.principal, x.resource_name) for x in acls} == {
            ("User:alice", "orders"), ("User:alice", "billing"), ("User:bob", "orders-")}
