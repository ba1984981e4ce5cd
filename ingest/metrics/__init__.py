"""Live corrected metrics: the ingester's validated rows counted as Prometheus counters."""
