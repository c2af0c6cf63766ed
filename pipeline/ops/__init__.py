"""Operating the pipeline: one ingest run, the scheduler, status, and publishing snapshots.

:mod:`~qsite.pipeline.ops.ingest` is the one way every entry point runs an ingest;
:mod:`~qsite.pipeline.ops.schedule` repeats it; :mod:`~qsite.pipeline.ops.status` reports
what ran; :mod:`~qsite.pipeline.ops.publish` copies the database to the snapshot
store. The top of :mod:`pipeline`: may import every other room.
"""

#: Seconds a stopping scheduler lets a running ingest finish before exiting anyway. Here, not in
#: :mod:`~qsite.pipeline.ops.schedule`: the command line shows it in its help without importing the pipeline.
DEFAULT_GRACE = 5.0
