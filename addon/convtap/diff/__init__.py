"""Protocol diffing: the shapes of a capture (fields, types, value sets, event kinds, ops; no
session value: userdata.toml), shapes files to keep as baselines, and what changed between two
captures, or between a capture and the models. May import `ingest` and `store` (to read
captures), `wire` and `models`."""
