"""The capture database, the only place that speaks SQL: its schema and migrations (`schema`),
typed rows (`rows`), opening it and the batching writer (`database`), the queries the
report reads (`report_queries`), and what Datasette shows of a capture (`canned`, and the
plugin Datasette loads, `datasette_plugin`: these two import no dependency of convtap's).
May import `redact`, `contract`, `wire` and `models`."""
