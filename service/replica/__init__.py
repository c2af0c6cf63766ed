"""A replica: following published snapshots, and handing the current one out.

:mod:`~service.replica.follow` swaps in each new snapshot from the store,
:mod:`~service.replica.folder` fetches and checks it into the data folder the workers share, and
:mod:`~service.replica.claims` keeps workers sharing a data folder from deleting
each other's files;
:mod:`~service.replica.snapshot_api` serves the file. May import
:mod:`service.api` and :mod:`service.http`; not :mod:`service.describe`.
"""
