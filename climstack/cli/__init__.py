"""The command line: one module per command, each adding its subcommand with `register`;
climstack/__main__.py groups them for `climstack --help` (GROUPS) and puts the project's own
checks under `climstack dev` (DEV_MODULES)."""
