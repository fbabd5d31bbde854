"""The protocol contract: the rule registry (rules.toml, one check function per rule id), the
auditor that runs them over a session, and the report formats (text, JSON, JUnit, SARIF,
GitHub). Pure: it is given values, never a database. May import `wire` and `models`."""
