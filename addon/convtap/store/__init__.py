"""The capture database, the only place that speaks SQL: its schema and migrations (`schema`),
typed rows (`rows`), opening it and the batching writer (`database`), how raw events and
message texts are stored small and read back (`compact`), the queries the report reads
(`report_queries`; its timeline by request, and what changed, for the live page:
`timeline_queries`), and what Datasette shows of a capture (`canned`, and the plugin Datasette
loads, `datasette_plugin`: these three import no dependency of convtap's).
May import `redact`, `contract`, `wire` and `models`."""
