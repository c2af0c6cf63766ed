"""A replica: following published snapshots, and handing the current one out.

:mod:`~service.replica.follow` swaps in each new snapshot from the store, and
:mod:`~service.replica.claims` keeps workers sharing a data folder from deleting
each other's files;
:mod:`~service.replica.snapshot_api` serves the file. May import
:mod:`service.api` and :mod:`service.http`; not :mod:`service.describe`.
"""
