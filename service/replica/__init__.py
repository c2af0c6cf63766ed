"""A replica: following published snapshots, and handing the current one out.

:mod:`~service.replica.follow` swaps in each new snapshot from the store;
:mod:`~service.replica.snapshot_api` serves the file. May import
:mod:`service.api` and :mod:`service.http`; not :mod:`service.describe`.
"""
