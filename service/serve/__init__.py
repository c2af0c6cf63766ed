"""``qsite serve``: the process that serves the API (granian, its workers, logging).

The top room of :mod:`service`; each module has one job:

- :mod:`qsite.service.serve.runner`: :func:`~qsite.service.serve.runner.serve`, the granian server
  and its supervising process;
- :mod:`qsite.service.serve.app`: the Datasette each worker builds (database, ``metadata.yml``,
  ``datasette.yaml``, the plugin's settings), and the check of ``datasette.yaml`` at start;
- :mod:`qsite.service.serve.worker`: what a worker does after the fork (its app, its settling);
- :mod:`qsite.service.serve.ports`: one server per address, never two sharing a port;
- :mod:`qsite.service.serve.descriptors`: the open-file limit and the connection cap it allows.
"""
