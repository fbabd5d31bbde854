"""Protocol diffing: the shapes of a capture (fields, types, value sets, event kinds, ops) and
what changed between two captures, or between a capture and the models. May import `record`
(to read captures), `wire` and `models`."""
