"""The command line: one module per command, each adding its subcommand with `register`."""
