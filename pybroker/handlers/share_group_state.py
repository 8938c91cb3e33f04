"""The share coordinator's APIs (KIP-932, 83-87): the leader of a data partition reads and
writes its share-partitions' state at the share coordinator of each key (this broker, when
it leads the key's partition of `__share_group_state`). Broker to broker; CLUSTER_ACTION on
the cluster, as Kafka's. Each partition is answered on its own: NOT_COORDINATOR when another
broker leads its state partition, COORDINATOR_LOAD_IN_PROGRESS while this one loads it,
FENCED_LEADER_EPOCH for a data leader older than one seen before."""
from __future__ import annotations

from typing import Any, Callable

from construct import Container

from protocol.api_keys import ApiKey
from protocol.errors import ErrorCode
from pybroker.cluster.features import SHARE_VERSION
from pybroker.coordinator.share_partition import RecordState, StateBatch
from pybroker.coordinator.share_records import ShareSnapshot
from pybroker.coordinator.share_state_store import ShareStateStore, StateKey
from pybroker.handlers._authz import CLUSTER, Op, require
from pybroker.handlers._base import Handler, RequestContext
from pybroker.handlers._share import share_coordinator


def _store(ctx: RequestContext) -> ShareStateStore:
    require(ctx, Op.CLUSTER_ACTION, CLUSTER)
    return share_coordinator(ctx).store


def _keys(request: Container) -> list[tuple[StateKey, Container]]:
    return [((request.group_id, t.topic_id, p.partition), p)
            for t in request.topics for p in t.partitions]


def _results(request: Container, answer: Callable[[StateKey, Container], dict]) -> dict:
    """The response: each requested partition in request order, `answer` giving its fields
    after the partition index."""
    return {"results": [
        {"topic_id": t.topic_id, "partitions": [
            {"partition": p.partition, **answer((request.group_id, t.topic_id, p.partition), p)}
            for p in t.partitions]}
        for t in request.topics]}


def _code(code: ErrorCode) -> dict:
    return {"error_code": int(code), "error_message": None if not code else code.message}


def _invalid(request: Container) -> dict | None:
    """INVALID_REQUEST for every partition of a request without a group id, as Kafka."""
    if request.group_id:
        return None
    return _results(request, lambda key, p: _code(ErrorCode.INVALID_REQUEST))


async def read_state(ctx: RequestContext, request: Container) -> dict:
    store = _store(ctx)
    if not request.group_id:
        return _read_error(request, ErrorCode.INVALID_REQUEST)
    answers = {key: store.read(key, p.leader_epoch) for key, p in _keys(request)}

    def answer(key: StateKey, p: Container) -> dict:
        code, snapshot = answers[key]
        return {**_code(code), "state_epoch": snapshot.state_epoch,
                "start_offset": snapshot.start_offset,
                "state_batches": [{"first_offset": b.first_offset, "last_offset": b.last_offset,
                                   "delivery_state": int(b.delivery_state),
                                   "delivery_count": b.delivery_count}
                                  for b in snapshot.batches]}
    return _results(request, answer)


async def read_summary(ctx: RequestContext, request: Container) -> dict:
    store = _store(ctx)
    if not request.group_id:
        return _summary_error(request, ErrorCode.INVALID_REQUEST)
    answers = {key: store.summary(key) for key, _ in _keys(request)}
    return _results(request, lambda key, p: {
        **_code(answers[key][0]), "state_epoch": answers[key][1].state_epoch,
        "leader_epoch": answers[key][1].leader_epoch,
        "start_offset": answers[key][1].start_offset})


async def write_state(ctx: RequestContext, request: Container) -> dict:
    store = _store(ctx)
    if (refused := _invalid(request)) is not None:
        return refused
    codes = await store.write({key: ShareSnapshot(
        p.state_epoch, p.start_offset,
        tuple(StateBatch(b.first_offset, b.last_offset, RecordState(b.delivery_state),
                         b.delivery_count) for b in p.state_batches),
        p.leader_epoch) for key, p in _keys(request)})
    return _results(request, lambda key, p: _code(codes[key]))


async def initialize_state(ctx: RequestContext, request: Container) -> dict:
    """A share-partition started at StartOffset with no record in flight, at StateEpoch."""
    store = _store(ctx)
    if (refused := _invalid(request)) is not None:
        return refused
    codes = await store.write({key: ShareSnapshot(p.state_epoch, p.start_offset, ())
                               for key, p in _keys(request)}, initialize=True)
    return _results(request, lambda key, p: _code(codes[key]))


async def delete_state(ctx: RequestContext, request: Container) -> dict:
    store = _store(ctx)
    if (refused := _invalid(request)) is not None:
        return refused
    codes = await store.delete([key for key, _ in _keys(request)])
    return _results(request, lambda key, p: _code(codes[key]))


def _codes_error(ctx: RequestContext, request: Container, code: ErrorCode) -> dict:
    return _results(request, lambda key, p: _code(code))


def _read_error(request: Container, code: ErrorCode) -> dict:
    return _results(request, lambda key, p: {**_code(code), "state_epoch": 0,
                                             "start_offset": -1, "state_batches": []})


def _summary_error(request: Container, code: ErrorCode) -> dict:
    return _results(request, lambda key, p: {**_code(code), "state_epoch": 0,
                                             "leader_epoch": -1, "start_offset": -1})


def _handler(key: ApiKey, handle: Any, error: Any) -> Handler:
    return Handler(key, 0, 0, handle, error, feature=(SHARE_VERSION, 1))


HANDLERS = (
    _handler(ApiKey.INITIALIZE_SHARE_GROUP_STATE, initialize_state, _codes_error),
    _handler(ApiKey.READ_SHARE_GROUP_STATE, read_state,
             lambda ctx, request, code: _read_error(request, code)),
    _handler(ApiKey.WRITE_SHARE_GROUP_STATE, write_state, _codes_error),
    _handler(ApiKey.DELETE_SHARE_GROUP_STATE, delete_state, _codes_error),
    _handler(ApiKey.READ_SHARE_GROUP_STATE_SUMMARY, read_summary,
             lambda ctx, request, code: _summary_error(request, code)),
)
