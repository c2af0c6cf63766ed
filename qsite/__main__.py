"""``python -m qsite``: the ``qsite`` command, for child processes started without the console script."""

from qsite.cli import cli

if __name__ == "__main__":
    cli(prog_name="qsite")
