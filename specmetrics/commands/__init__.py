"""One module per subcommand, each with ``add_parser(subparsers)``; the parser's ``run``
default takes the parsed arguments and returns the exit code."""
