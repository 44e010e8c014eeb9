"""The command line: click commands, the option table, the text and JSON renderers, logging."""

from reconcile.cli.main import cli, main

__all__ = ["cli", "main"]
