"""Test-wide setup: convtap's per-installation redaction key goes into a throw-away config
directory, for this process and every convtap process the tests start."""

from __future__ import annotations

import os
import tempfile

os.environ["XDG_CONFIG_HOME"] = tempfile.mkdtemp(prefix="convtap-tests-config-")
os.environ.pop("CONVTAP_REDACT_KEY", None)
