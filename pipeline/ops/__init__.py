"""Operating the pipeline: one ingest run, the scheduler, status, and publishing snapshots.

:mod:`~pipeline.ops.ingest` is the one way every entry point runs an ingest;
:mod:`~pipeline.ops.schedule` repeats it; :mod:`~pipeline.ops.status` reports
what ran; :mod:`~pipeline.ops.publish` copies the database to the snapshot
store. The top of :mod:`pipeline`: may import every other room.
"""
