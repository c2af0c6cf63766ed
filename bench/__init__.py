"""The benchmark behind ``make bench``; see ``bench/run.py``."""
