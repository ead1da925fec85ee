"""The floor's records: every table's results in PostgreSQL, reports, and the integrity watch.

``lammer records`` subscribes to the floor (or one controller's broker) as the MQTT user
``records`` and writes every table's messages into PostgreSQL, idempotently by
``(table, seq)``; ``records.integrity`` compares each table's outcomes with the exact par
sheets and the service publishes what is off on ``lammer-floor/integrity/<table>``.

It reads the MQTT contract (``contract``) and the rules' exact odds (``rules``), never
the daemon's internals (import-linter, pyproject.toml).

Exceptions::

    RecordsError
     +-- StoreError (RuntimeError)      the database refused or is unreachable
     |    +-- StoreUnreachable (ConnectionError)  the connection was lost: write again
     |    +-- MigrationError            a migration failed (nothing of it applied)
     +-- MessageError (ValueError)      a message that is not the contract's
     +-- ReportError (ValueError)       a report asked for something that does not exist
"""
