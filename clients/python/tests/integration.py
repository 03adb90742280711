"""What the integration tests share: the server they need (ESKV_URL and
ESKV_TOKEN, a token that may read and write ``tenant/``), failing — not
skipping — when it is not given, and names unique to one run."""

from __future__ import annotations

import os
import sys
import uuid

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "src"))

#: Unique to this run, so runs against one long-lived stack do not meet.
RUN = uuid.uuid4().hex[:8]


def server() -> tuple[str, str]:
    """ESKV_URL and ESKV_TOKEN; AssertionError (a failure) when missing."""
    url, token = os.environ.get("ESKV_URL", ""), os.environ.get("ESKV_TOKEN", "")
    if not url or not token:
        raise AssertionError("the integration tests need a server: set ESKV_URL and ESKV_TOKEN "
                             "(or run the unit tests alone: -p 'test_unit*.py')")
    return url, token


def tenant(test_id: str) -> str:
    """A tenant of one test of this run: its method name, then the run."""
    name = test_id.rsplit(".", 1)[-1]
    if name.startswith("test_"):
        name = name[5:]
    return f"{name.replace('_', '-')}-{RUN}"
