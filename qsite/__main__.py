"""``python -m qsite``: the ``qsite`` command, for child processes started without the console script."""

from .cli import cli

if __name__ == "__main__":
    cli(prog_name="qsite")
