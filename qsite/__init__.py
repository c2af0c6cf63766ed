"""The ``qsite`` command: the top layer, which imports the pipeline and the service and is imported by nothing."""
