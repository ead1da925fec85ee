"""Prometheus metrics, served the same way by every lammer process that has them.

``lammer run`` (a table), ``lammer web`` and ``lammer records run`` each keep a private
``CollectorRegistry`` (never prometheus_client's global one) whose collectors read the
process's own state when scraped, and serve it in the text format on a listener of their own
(``metrics.endpoint``): opt-in, loopback unless the scrapers allowed are named. What each
family means: docs/floor/monitoring.md. Imports nothing of lammer.
"""
