"""qsite's service: the /api/v1 JSON interface, as a Datasette plugin, served by granian.

Rooms, each importing only the ones below it (kept by the import-linter
contracts in ``pyproject.toml``):

- :mod:`qsite.service.serve`: ``qsite serve``, the process (granian, workers, ports, descriptors, logging);
- :mod:`qsite.service.datasette`: the plugin's hooks and everything Datasette-specific;
- :mod:`qsite.service.replica` and :mod:`qsite.service.describe`, side by side: following
  published snapshots; describing the API (OpenAPI, the docs page);
- :mod:`qsite.service.api`: what each endpoint is and how its answer is built;
- :mod:`qsite.service.http` and :mod:`qsite.service.i18n`: HTTP plumbing (problem
  documents, targets, rate limit) and the interface languages;
- :mod:`qsite.service.compat`, at the bottom: every private Datasette or granian
  attribute qsite still needs, and where Datasette 0.65 and 1.0 differ; it
  imports nothing of qsite's own.
"""
