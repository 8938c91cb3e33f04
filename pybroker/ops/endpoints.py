"""What the HTTP side door answers: /healthz, /readyz and /metrics, as Kubernetes probes and
Prometheus expect them.

- `/healthz`: 200 while the process serves at all (the side door is up before the logs load,
  so a long recovery is not mistaken for a hung process and restarted).
- `/readyz`: 503 until the logs are recovered and the Kafka listeners are served; in a
  cluster (zookeeper.connect), also while the broker is not registered with a live session or
  not yet in its own metadata image (after a lost session it is not ready until it has
  registered again); 200 after. The body says which condition is missing.
- `/metrics`: Prometheus text from the broker's own registry (`ops/metrics.py`), rendered
  inline with prometheus_client's `generate_latest`; 503 before the broker exists. The
  registry, and prometheus_client with it (~40 ms of imports), are loaded at the first scrape,
  not at start.
- `/` and its pages (`/topics`, `/topic/<name>`, `/groups`, `/group/<id>`): the status page
  for people (`ops/status/page.py`); 503 before the broker exists.

The server (`server.py`) builds this before the broker, starts the HTTP listener with it, and
reports progress with `broker_built` and `serving`.
"""
from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from pybroker.ops.http_server import HttpResponse

if TYPE_CHECKING:
    from prometheus_client.registry import CollectorRegistry

    from pybroker.ops.status.page import StatusPage

__all__ = ["OpsEndpoints"]


STATUS_PREFIXES = ("/topics", "/topic/", "/groups", "/group/")


def _text(status: int, text: str) -> HttpResponse:
    return HttpResponse(status, (text + "\n").encode())


class OpsEndpoints:
    def __init__(self) -> None:
        self._registry: Callable[[], CollectorRegistry] | None = None
        self._registered: Callable[[], bool] | None = None
        self._serving = False
        self._status: StatusPage | None = None

    def broker_built(self, registry: Callable[[], CollectorRegistry],
                     registered: Callable[[], bool], status: StatusPage | None = None) -> None:
        """The logs are recovered; `registry()` gives the broker's metrics registry (built
        on first call); `registered` says whether the broker is a member of its cluster now
        (always True on a single broker); `status` serves the status page."""
        self._registry = registry
        self._registered = registered
        self._status = status

    def serving(self) -> None:
        """The Kafka listeners accept and serve connections."""
        self._serving = True

    def readiness(self) -> str | None:
        """None when ready, else why not."""
        if self._registered is None:
            return "logs are being recovered"
        if not self._serving:
            return "Kafka listeners are not serving yet"
        if not self._registered():
            return "not registered in the cluster (or no metadata image yet)"
        return None

    def __call__(self, method: str, path: str) -> HttpResponse:
        if path == "/healthz":
            return _text(200, "ok")
        if path == "/readyz":
            missing = self.readiness()
            return _text(200, "ready") if missing is None else _text(503, f"not ready: {missing}")
        if path == "/metrics":
            if self._registry is None:
                return _text(503, "starting: logs are being recovered")
            from prometheus_client.exposition import CONTENT_TYPE_LATEST, generate_latest
            return HttpResponse(200, generate_latest(self._registry()), CONTENT_TYPE_LATEST)
        if path == "/" or path.startswith(STATUS_PREFIXES):
            if self._status is None:
                return _text(503, "starting: logs are being recovered")
            page = self._status(path)
            if page is not None:
                return page
        return _text(404, f"not found: {path} (try /healthz, /readyz, /metrics)")
