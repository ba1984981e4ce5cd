"""The ``specmetrics`` command line."""
