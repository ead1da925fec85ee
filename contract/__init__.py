"""The MQTT contract of lammer (``shared/spec/mqtt-api.md``), shared by every side.

Producers (the daemon) build their payloads with it, consumers (the displays, the pit,
the floor's services) parse with it: topics, payload and request models, the floor's
topic names and the JSON Schemas in ``docs/schemas/``. It imports only ``rules`` and
pydantic, so any side may import it without pulling in the running table.
"""
