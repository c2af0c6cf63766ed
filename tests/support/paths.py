"""Where the project and its bundled samples are, for tests that read them."""

from __future__ import annotations

from pathlib import Path

#: The repository's root folder.
ROOT = Path(__file__).resolve().parents[2]
#: The bundled sample data: ``site-export.json`` and ``feeds/``.
SAMPLES = ROOT / "pipeline" / "samples"
#: The three bundled feeds: ``lab-notes.xml`` (RSS 2.0), ``industry-wire.atom``, ``capital-brief.rdf`` (RSS 1.0, Latin-1).
FEEDS = SAMPLES / "feeds"
#: The bundled site export (export format v1), with quiz content and user data the pipeline must drop.
SITE_EXPORT = SAMPLES / "site-export.json"
