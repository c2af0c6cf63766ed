"""qsite's service: the /api/v1 JSON interface, as a Datasette plugin, served by granian.

Rooms, each importing only the ones below it (kept by the import-linter
contracts in ``pyproject.toml``):

- :mod:`service.serve`: ``qsite serve``, the process (granian, workers, ports, descriptors, logging);
- :mod:`service.datasette`: the plugin's hooks and everything Datasette-specific;
- :mod:`service.replica` and :mod:`service.describe`, side by side: following
  published snapshots; describing the API (OpenAPI, the docs page);
- :mod:`service.api`: what each endpoint is and how its answer is built;
- :mod:`service.http` and :mod:`service.i18n`: HTTP plumbing (problem
  documents, targets, rate limit) and the interface languages;
- :mod:`service.compat`, at the bottom: every private Datasette or granian
  attribute qsite still needs, and where Datasette 0.65 and 1.0 differ; it
  imports nothing of qsite's own.
"""
