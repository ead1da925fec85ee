"""What every package of lammer needs and would otherwise write again: the reconnect policy
(``backoff``), a token bucket (``bucket``), network endpoints and ``HOST:PORT``
(``endpoints``), configuration files (``config_files``), strict JSON (``strict_json``)
a client's TLS context (``tls``), the running task (``tasks``) and a private file
replaced whole (``files``).

It sits below every package but ``rules`` and imports nothing of lammer (pyproject.toml's
import contracts), so any of them may use it without an exception to the layers.
"""
