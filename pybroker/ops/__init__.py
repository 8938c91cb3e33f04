"""The operator's side door: the HTTP server, its endpoints (`/metrics`, health, the status
page), the Prometheus metrics and consumer-group lag. Read-only views of the broker."""
