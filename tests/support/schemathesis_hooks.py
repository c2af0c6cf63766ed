"""Schemathesis hooks for the runs against a real server (``SCHEMATHESIS_HOOKS=tests.support.schemathesis_hooks``).

The snapshot file is sent as application/octet-stream, which schemathesis has no
deserializer for: it would skip checking that answer against its schema. Its
schema is a binary string, so the bytes are handed over as one (latin-1 maps
each byte to one character).
"""

from __future__ import annotations

import schemathesis


@schemathesis.deserializer("application/octet-stream")
def octet_stream(ctx, response) -> str:
    return response.content.decode("latin-1")
