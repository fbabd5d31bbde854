"""Writing a capture out: as a HAR 1.2 file (`har`), optionally with its words blanked so it can
be shared (`blank`, `blank_stream`: structure, ids and enum values kept). May import `record`
and everything below it."""
