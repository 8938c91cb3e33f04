"""franz-go (kgo for producing and consuming, kadm for administration), driven through
compat/go (a Go program shared by every cell of a run: `compat.helper_process`).

Reading to the end keeps the control records (kgo.KeepControlRecords) so that the position
reported is where franz-go's own cursor went, past transaction markers.
"""
from __future__ import annotations

from compat.helper_process import Helper, HelperAdapter, go_binary


class FranzGo(HelperAdapter):
    name = "franz-go"
    order = 60
    tool = "go"
    helper = Helper("franz-go", lambda: [str(go_binary()), "franz"])


ADAPTER = FranzGo()
