"""The capture database, the only place that speaks SQL: its schema and migrations (`schema`),
typed rows (`rows`), opening it and the batching writer (`database`), and the queries the
report reads (`report_queries`). May import `redact`, `contract`, `wire` and `models`."""
