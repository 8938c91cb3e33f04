"""A Fetch request's session fields (KIP-227), as Kafka's FetchMetadata: the values both the
broker's session cache (`pybroker/replica/fetch_session.py`) and a session-keeping fetcher
(`pybroker/client/fetch_session_handler.py`) speak."""
from __future__ import annotations

__all__ = ["FINAL_EPOCH", "INITIAL_EPOCH", "INVALID_SESSION_ID", "next_epoch"]

INVALID_SESSION_ID = 0  # no session: a sessionless request, or an answer that made none
INITIAL_EPOCH = 0  # a full request that asks for a new session
FINAL_EPOCH = -1  # a full request that closes its session (or keeps none)
_INT32_MAX = 0x7FFFFFFF


def next_epoch(epoch: int) -> int:
    """The epoch after `epoch`: a negative one stays (final), the largest wraps to 1."""
    if epoch < 0:
        return epoch
    return 1 if epoch == _INT32_MAX else epoch + 1
