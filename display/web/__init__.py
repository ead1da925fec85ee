"""``lammer web``: the table's screens in the browser, fed by the MQTT contract.

``config`` (options and ``web.toml``), ``contract`` (the payloads accepted from the broker),
``store`` (the latest state of every table, ordered by ``seq``), ``relay`` (the two MQTT
connections and the browsers' WebSockets), ``users`` (users file, sessions, login rate
limit), ``server`` (the aiohttp application), ``cmd`` (the command line). The pages are ES
modules and one stylesheet in ``static/``, served as they are: no build step, nothing
fetched from anywhere else.
"""
