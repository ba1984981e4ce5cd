"""One module per subcommand, each with ``add_parser(subparsers)``; the parser's ``run``
default takes the parsed arguments and returns the exit code."""

#: The ``--data`` argument's help, the same for every command that reads what ``ingest`` wrote.
DATA_HELP = ("The output of 'specmetrics ingest': a Delta Lake table in a folder, or s3://bucket/prefix for one on S3 "
             "(a plain tree written before tables: 'specmetrics table convert' makes it one).")
