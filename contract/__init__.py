"""The MQTT contract of lammer (``shared/spec/mqtt-api.md``), shared by every side.

One declaration per topic (``contract.payloads``): producers (the daemon) build their
payloads with it, consumers (the displays, the pit, the floor's services) parse with it.
Also here: the requests (``contract.requests``), the names people read of games, bets and
clauses (``contract.vocabulary``), the floor's topic names (``contract.floor``), and what is
generated from the declarations: ``docs/schemas/`` (``contract.schemas``), the tables of
``docs/reference/mqtt.md`` (``contract.docs``) and the browser's ``js/contract.js``
(``contract.esmodule``). It imports only ``rules`` and pydantic, so any side may import it
without pulling in the running table.
"""
