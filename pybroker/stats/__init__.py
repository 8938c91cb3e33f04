"""Hot-path counters: per-API request statistics and the latency histograms they feed.
The status page and `/metrics` read them; nothing here does I/O."""
