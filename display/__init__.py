"""The display layer: the screens of a table, built only on the MQTT contract.

``display.terminal`` is the technician's terminal console (``lammer display``);
``display.web`` serves the player display, the pit view and the stickperson terminal in the
browser (``lammer web``). Nothing here imports ``daemon``: a display reads what the daemon
publishes (``shared/spec/mqtt-api.md``, ``docs/reference/mqtt.md``), never its internals.
"""
