"""A single broker's metadata files imported into a node's store (pybroker/node/
metadata_import.py): written by the single broker's own stores, read back by the cluster's
own stores (ZkMetadataStore, ZkAclStore, ZkProducerIdManager) from the imported tree; bad
files refused with nothing changed; an interrupted import finished; the single broker refused
over the node's dir. Real processes and stock clients: tests/integration/test_node_supervisor.py
and tests/node/test_metadata_import_crash.py."""
from __future__ import annotations

import logging
from collections.abc import Iterator
from pathlib import Path

import pytest

from pybroker.__main__ import main
from pybroker.cluster.metadata import LocalMetadataStore, MetadataImage
from pybroker.cluster.zk_store import ZkMetadataStore
from pybroker.config import ConfigError, load_broker_config
from pybroker.coordinator.producer_ids import ZkProducerIdManager
from pybroker.node.metadata_import import IMPORT_RECORD, KEPT_SUFFIX, METADATA_DIR, \
    ImportRefused, check_single_broker, import_single_broker
from pybroker.node.metadata_service import _DurableTree, _Journal
from pybroker.node.worker import NODE_FILE
from pybroker.security.acl.authorizer import Authorizer
from pybroker.security.acl.store import ZkAclStore
from tests.node.single_broker_dir import BINDINGS, CREDENTIAL, NODE, node_config, single_broker


def snapshot(log_dir: Path) -> dict[str, bytes]:
    """Every file of the dir but `.lock`, which the import locks as a broker's start does."""
    return {str(p.relative_to(log_dir)): p.read_bytes() for p in sorted(log_dir.rglob("*"))
            if p.is_file() and p.name != ".lock"}


def topics(image: MetadataImage) -> dict[str, tuple]:
    """Each topic's fields (TopicInfo compares by identity; a partition's state without the
    znode version only the ZooKeeper store has)."""
    return {name: (info.topic_id, info.partitions, dict(info.configs), info.internal)
            for name, info in image.topics.items()}


@pytest.fixture
def imported_tree(tmp_path: Path) -> Iterator[tuple[MetadataImage, _DurableTree]]:
    image = single_broker(tmp_path)
    assert import_single_broker(node_config(tmp_path))
    tree = _DurableTree(_Journal(tmp_path / METADATA_DIR))
    yield image, tree
    tree.journal.close()


def test_the_cluster_stores_read_back_everything_the_single_broker_kept(
        tmp_path: Path, imported_tree: tuple[MetadataImage, _DurableTree]) -> None:
    before, tree = imported_tree
    store = ZkMetadataStore("memory", NODE, rack=None, session_timeout_ms=6000,
                            connection_timeout_ms=6000, client_class=tree.client)
    try:
        store.attach(tmp_path, None)
        after = store.image
        assert after.cluster_id == before.cluster_id
        assert topics(after) == topics(before)  # ids, replicas, leaders, epochs, ISR, configs
        assert after.topics["orders"].partitions[1].leader_epoch == 4
        assert after.topics["__consumer_offsets"].internal
        assert after.client_quotas == before.client_quotas
        assert after.broker_configs == before.broker_configs
        assert after.group_configs == before.group_configs
        assert after.scram_credentials == {"alice": {"SCRAM-SHA-256": CREDENTIAL.to_kafka()}}
        authorizer = Authorizer()
        ZkAclStore(store.zk, authorizer)
        assert authorizer.bindings == frozenset(BINDINGS)
        # The broker had reserved ids 0-999: the node's first block starts after them.
        assert ZkProducerIdManager(store.zk, NODE + 1000)._claim() == (1000, 2000)
    finally:
        store.close()


def test_the_files_are_kept_renamed_and_a_second_start_imports_nothing(
        tmp_path: Path, imported_tree: tuple[MetadataImage, _DurableTree]) -> None:
    names = ["pybroker-metadata.json", "pybroker-acls.json",
             "pybroker-scram-credentials.json", "producer-ids"]
    assert not [n for n in names if (tmp_path / n).exists()]
    assert all((tmp_path / (n + KEPT_SUFFIX)).exists() for n in names)
    assert (tmp_path / "meta.properties").exists()  # worker 0 still reads it
    assert (tmp_path / METADATA_DIR / IMPORT_RECORD).exists()
    before = snapshot(tmp_path)
    assert not import_single_broker(node_config(tmp_path))
    assert snapshot(tmp_path) == before


@pytest.mark.parametrize("name, content, said", [
    ("pybroker-metadata.json", '{"version": 1, "topics": [{"name": "orders", "topic',
     "it is not JSON"),
    ("pybroker-metadata.json", '{"version": 1}', "it has no 'topics'"),
    ("pybroker-metadata.json", '{"version": 1, "topics": [{"name": "t", "topic_id": '
     '"0b1f5b7e-9c6e-4c0e-9a8e-1b2c3d4e5f60", "configs": {}, "partitions": [{"partition": 0, '
     '"leader": 7, "leader_epoch": 0, "replicas": [7, 8], "isr": [7]}]}]}',
     "partition t-0 has replicas [7, 8]"),
    ("pybroker-acls.json", "[1, 2", "it is not JSON"),
    ("pybroker-scram-credentials.json", '{"users": {"alice": {"SCRAM-SHA-256": "salt=c2FsdA=="}}}',
     "it has no 'stored_key'"),
    ("producer-ids", "12ab\n", "it is not what its store writes"),
])
def test_a_corrupt_file_is_named_and_nothing_changes(
        tmp_path: Path, name: str, content: str, said: str) -> None:
    single_broker(tmp_path)
    (tmp_path / name).write_text(content)
    before = snapshot(tmp_path)
    with pytest.raises(ImportRefused) as caught:
        import_single_broker(node_config(tmp_path))
    message = str(caught.value)
    assert message.startswith(f"{tmp_path / name} cannot be imported into the node's metadata "
                              "store: ") and "\n" not in message
    assert said in message and "Nothing was changed" in message
    assert snapshot(tmp_path) == before
    assert not (tmp_path / METADATA_DIR).exists()


def test_another_node_id_or_cluster_id_is_refused_before_anything_is_written(
        tmp_path: Path) -> None:
    single_broker(tmp_path)
    before = snapshot(tmp_path)
    with pytest.raises(ImportRefused, match="belongs to node 7, but node.id is 8"):
        import_single_broker(load_broker_config(None, {"log.dirs": str(tmp_path),
                                                       "node.id": "8"}))
    with pytest.raises(ConfigError, match="doesn't match stored clusterId"):
        import_single_broker(node_config(tmp_path, **{"cluster.id": "AAAAAAAAAAAAAAAAAAAAAA"}))
    assert snapshot(tmp_path) == before


def test_a_file_left_by_an_interrupted_import_is_kept_if_it_is_the_one_imported(
        tmp_path: Path, imported_tree: tuple[MetadataImage, _DurableTree]) -> None:
    """A crash between the commit (the dir's rename) and the renames of the files."""
    kept = tmp_path / ("pybroker-metadata.json" + KEPT_SUFFIX)
    kept.rename(tmp_path / "pybroker-metadata.json")
    assert not import_single_broker(node_config(tmp_path))
    assert kept.exists() and not (tmp_path / "pybroker-metadata.json").exists()
    # One written since is not the file imported: refused, left alone.
    (tmp_path / "pybroker-acls.json").write_text("{}")
    with pytest.raises(ImportRefused, match="pybroker-acls.json is not the file this node "
                                            "imported on .*: it was written since"):
        import_single_broker(node_config(tmp_path))
    assert (tmp_path / "pybroker-acls.json").read_text() == "{}"


def test_a_node_over_a_dir_without_single_broker_files_imports_nothing(tmp_path: Path) -> None:
    assert not import_single_broker(node_config(tmp_path))
    assert not (tmp_path / METADATA_DIR).exists()


def test_a_dir_with_meta_properties_alone_gives_the_node_its_cluster_id(tmp_path: Path) -> None:
    """A broker that stopped before it wrote any metadata left meta.properties alone: its
    cluster id is imported all the same (worker 0 refuses a store naming another), and the
    file is left for worker 0 to read. The real start: tests/node/test_node_over_a_bare_dir.py."""
    (tmp_path / "meta.properties").write_text(
        f"version=1\ncluster.id=I9vAZs3fScSp4A12e9MyJw\nnode.id={NODE}\n")
    assert import_single_broker(node_config(tmp_path))
    tree = _DurableTree(_Journal(tmp_path / METADATA_DIR))
    try:
        store = ZkMetadataStore("memory", NODE, rack=None, session_timeout_ms=6000,
                                connection_timeout_ms=6000, client_class=tree.client)
        try:
            store.attach(tmp_path, None)
            assert store.image.cluster_id == "I9vAZs3fScSp4A12e9MyJw"
            assert store.image.topics == {}
        finally:
            store.close()
    finally:
        tree.journal.close()
    assert (tmp_path / "meta.properties").exists()
    assert not list(tmp_path.glob("*" + KEPT_SUFFIX))
    assert not import_single_broker(node_config(tmp_path))  # once


def test_a_bare_dir_of_another_node_id_is_refused_naming_it(tmp_path: Path) -> None:
    (tmp_path / "meta.properties").write_text(
        "version=1\ncluster.id=I9vAZs3fScSp4A12e9MyJw\nnode.id=3\n")
    with pytest.raises(ImportRefused, match="belongs to node 3, but node.id is 7"):
        import_single_broker(node_config(tmp_path))
    assert not (tmp_path / METADATA_DIR).exists()


def test_a_single_broker_over_an_imported_dir_is_refused_in_one_line(
        tmp_path: Path, imported_tree: tuple[MetadataImage, _DurableTree],
        capsys: pytest.CaptureFixture[str]) -> None:
    (tmp_path / NODE_FILE).write_text("num.cores=2\n")
    with pytest.raises(ConfigError) as caught:
        check_single_broker(load_broker_config(None, {"log.dirs": str(tmp_path)}), 2)
    message = str(caught.value)
    assert (f"{tmp_path / METADATA_DIR} holds the metadata of the node that ran on this log "
            "dir (num.cores=2), which a single broker does not read; its single-broker files "
            "of before were kept as *.imported") in message
    root = logging.getLogger()
    handlers, level = list(root.handlers), root.level
    try:
        assert main(["--defaults", "--override", "num.cores=1", "--override",
                     f"log.dirs={tmp_path}"]) == 1
    finally:
        for handler in [h for h in root.handlers if h not in handlers]:
            root.removeHandler(handler)
        root.setLevel(level)
    err = capsys.readouterr().err
    assert err.startswith("pybroker-server: ") and err.count("\n") == 1
    assert "go back to one broker by hand as docs/OPERATIONS.md" in err


def test_going_back_by_hand_gives_the_single_broker_its_metadata_of_the_import(
        tmp_path: Path, imported_tree: tuple[MetadataImage, _DurableTree]) -> None:
    """The way back docs/OPERATIONS.md describes."""
    before, tree = imported_tree
    tree.journal.close()
    for kept in tmp_path.glob("*" + KEPT_SUFFIX):
        kept.rename(kept.with_name(kept.name.removesuffix(KEPT_SUFFIX)))
    import shutil
    shutil.rmtree(tmp_path / METADATA_DIR)
    check_single_broker(load_broker_config(None, {"log.dirs": str(tmp_path)}), None)
    again = LocalMetadataStore(tmp_path, NODE, "127.0.0.1", 9092)
    assert topics(again.image) == topics(before)


def test_the_supervisors_check_knows_the_importers_files(tmp_path: Path) -> None:
    """import_check spells out the names the importer takes from the files' writers: the two
    must not drift, or the supervisor would skip an import it owes (or a finish)."""
    from pybroker.cluster.metadata import META_PROPERTIES
    from pybroker.node import import_check
    from pybroker.node.metadata_import import SOURCES
    assert import_check.SINGLE_BROKER_FILES == set(SOURCES)
    assert import_check.META_PROPERTIES == META_PROPERTIES
    assert not import_check.import_pending(tmp_path / "never-made")
    assert not import_check.import_pending(tmp_path)
    for name in (*SOURCES, META_PROPERTIES):
        log_dir = tmp_path / name.replace(".", "_")
        log_dir.mkdir()
        (log_dir / name).write_text("")
        assert import_check.import_pending(log_dir), name  # a single broker's dir
        (log_dir / METADATA_DIR).mkdir()
        # The node's store is there: only a file an interrupted import left is work.
        assert import_check.import_pending(log_dir) == (name in SOURCES), name
