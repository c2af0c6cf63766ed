"""What the tests share besides fixtures (the fixtures stay in ``tests/conftest.py``).

Import from the module that says what a thing is, e.g. ``from tests.support.feeds import Entry, rss``:

* :mod:`~tests.support.paths`: where the project and its bundled samples are.
* :mod:`~tests.support.local_server`: real HTTP (and raw TCP) servers on 127.0.0.1 and what they answer.
* :mod:`~tests.support.feeds`: RSS 2.0 and Atom documents built in code, and feeds that grow on every fetch.
* :mod:`~tests.support.hostile_feeds`: the corpus of hostile feed documents.
* :mod:`~tests.support.processes`: the real ``qsite`` command, free ports, polling, stopping processes.
* :mod:`~tests.support.config_files`: ``qsite.yml`` files in a test's folder.
* :mod:`~tests.support.site_exports`: a second version of the site export, and configs for both.
* :mod:`~tests.support.snapshot`: the rows a database holds, to assert that nothing changed.
* :mod:`~tests.support.known_data`: a database seeded with a small catalog and news the API tests know by heart.
* :mod:`~tests.support.api_client`: requests through ``datasette.client``, each /api/v1 answer checked.
* :mod:`~tests.support.openapi_check`: validation of a response against the OpenAPI document.
* :mod:`~tests.support.problems`: what every problem answer (``application/problem+json``) must look like.
"""
