"""A broker's HTTP side door read as Prometheus reads it: one request, /metrics parsed with
prometheus_client's own parser into samples, and one sample's value; for the side door's tests
(tests/integration/test_http_metrics.py) and the operations tests that read the metrics."""
from __future__ import annotations

import http.client

from prometheus_client.parser import text_string_to_metric_families

Samples = dict[tuple[str, frozenset[tuple[str, str]]], float]


def get(port: int, path: str, method: str = "GET") -> tuple[int, bytes, str]:
    conn = http.client.HTTPConnection("127.0.0.1", port, timeout=10)
    try:
        conn.request(method, path)
        response = conn.getresponse()
        return response.status, response.read(), response.getheader("Content-Type", "")
    finally:
        conn.close()


def scrape(port: int) -> Samples:
    status, body, content_type = get(port, "/metrics")
    assert status == 200 and content_type.startswith("text/plain; version=")
    return {(s.name, frozenset(s.labels.items())): s.value
            for family in text_string_to_metric_families(body.decode())
            for s in family.samples}


def value(samples: Samples, name: str, **labels: str) -> float:
    return samples.get((name, frozenset(labels.items())), 0.0)
