"""A client's TLS context, as every lammer process that connects to a broker makes it."""

from __future__ import annotations

import ssl
from pathlib import Path
from typing import overload


@overload
def client_context(ca_file: None) -> None: ...
@overload
def client_context(ca_file: Path) -> ssl.SSLContext: ...
def client_context(ca_file: Path | None) -> ssl.SSLContext | None:
    """TLS 1.2 at least, the server's certificate and name verified with ``ca_file``; None
    (plain TCP) without one. ``OSError`` or ``ssl.SSLError`` for a file that is no CA."""
    if ca_file is None:
        return None
    context = ssl.create_default_context(cafile=str(ca_file))
    context.minimum_version = ssl.TLSVersion.TLSv1_2
    return context
