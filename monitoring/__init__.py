"""Live corrected metrics for Prometheus: what an ingester validates, counted by outcome shape
(:mod:`monitoring.histogram`, :mod:`monitoring.live`), turned into counters by the views' own SQL
at each scrape and served over HTTP (:mod:`monitoring.exposition`, :mod:`monitoring.families`)."""
