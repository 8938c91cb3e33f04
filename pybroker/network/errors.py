"""How the connection layer gives up on one connection: dispatch, the frame loop and the TLS
transport all raise it, and the connection's task closes only that connection. Its own
module so the transport below dispatch need not import dispatch for it."""
from __future__ import annotations


class CloseConnection(Exception):
    """The request cannot be answered; the connection is closed, nothing else is affected."""
