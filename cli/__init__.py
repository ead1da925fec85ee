"""The ``lammer`` command line: one module per subcommand (``cli.main`` lists them)."""
