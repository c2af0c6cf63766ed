"""A replica: following published snapshots, and handing the current one out.

:mod:`~qsite.service.replica.follow` swaps in each new snapshot from the store,
:mod:`~qsite.service.replica.folder` fetches and checks it into the data folder the workers share, and
:mod:`~qsite.service.replica.claims` keeps workers sharing a data folder from deleting
each other's files;
:mod:`~qsite.service.replica.snapshot_api` serves the file. May import
:mod:`qsite.service.api` and :mod:`qsite.service.http`; not :mod:`qsite.service.describe`.
"""
