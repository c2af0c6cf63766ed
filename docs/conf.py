"""Sphinx configuration of qsite's documentation (``make docs``; checked by tests/test_docs_site.py).

Sphinx with MyST Markdown, as Datasette and sqlite-utils use Sphinx: its -W build
fails on a broken cross-reference, anchor or toctree entry, offline, and the pages
stay Markdown that reads well on a forge too.
"""

project = "qsite"
author = "qsite"
copyright = "qsite contributors"

extensions = ["myst_parser"]
source_suffix = {".md": "markdown"}
root_doc = "index"
exclude_patterns = ["_build", "README.md"]

# Anchors for headings down to ####, so [text](page.md#a-heading) links are checked:
# a link to a missing page or heading is a warning, and -W makes it an error.
myst_heading_anchors = 4
myst_enable_extensions = ["colon_fence", "deflist"]

html_theme = "furo"
html_title = "qsite"
html_static_path: list[str] = []
# Every page is written by hand or by cog (docs/_generate.py); no source links to the .md files.
html_show_sourcelink = False
# No index entries are written: no empty "Index" page (genindex) either.
html_use_index = False
# Text as written: `--follow` must not become an en dash, nor quotes curly in option names.
smartquotes = False
