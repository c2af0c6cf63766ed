"""The SQL of a search with a filter read from the filter's own index: its few matches, and a tag's count.

Templates of :mod:`qsite.db.news_queries` (its ``${NAME}`` layout, substituted there): a search with
sources reads each source's range of ``news_search_by_source`` (:func:`qsite.db.news_derived.search_by_source_columns`),
a search with a tag and no source the tag's own table (:mod:`qsite.db.news_search_tags`). Apart from the
queries they go into so that each module keeps to one job and a readable size.
"""

from __future__ import annotations

from string import Template

from qsite.db.model import TAGS
from qsite.db.news_search_tags import tag_table

#: A search with a tag or sources whose matches in them are at most this many sorts its page from
#: all of them (read from ``news_search_by_source``, or the tag's own table, each looked up in ``news``);
#: with more, a page is their newest from ``news_search``, found before long (docs/performance.md,
#: "The searches users send").
FEW_MATCHES = 50

#: The MATCH expression of a search in ``news_search_by_source`` (no facets there; sources are its key's
#: ranges): q in the column of the tag asked, any column when none.
BY_SOURCE = """\
select case when :tag = '' then :q when lower(:tag) in (${TAG_COLUMNS}) then '{' || lower(:tag) || '}: (' || :q || ')'
            else '""' end
"""


def tag_arms(select: str) -> str:
    """SQL: ``select`` (``${TABLE}`` its table) once for each tag's search table, joined by ``union all``.

    Each arm matches ``:q`` when a search asks for its tag and no source, and otherwise an empty
    phrase, which FTS5 answers at once (it runs a MATCH whatever the other conditions).
    """
    arms = []
    for tag in TAGS:
        table = tag_table(tag)
        match = f"{table} match iif(:q <> '' and :sources = '' and lower(:tag) = '{tag.lower()}', :q, '\"\"')"
        arms.append(Template(select).safe_substitute(TABLE=table, MATCH=match))
    return "\nunion all\n".join(arms)


#: A search with sources or a tag: its news rowids, at most :data:`FEW_MATCHES` and one more to know
#: there are more; from each source's range of ``news_search_by_source`` (a source's share of its
#: words' lists) or the tag's own table. When they are few, the page is sorted from them (the arm
#: ``few`` of :data:`qsite.db.news_arms.ARMS`), where ``news_search`` walked its words' lists
#: newest first to meet the filter, to their ends when they seldom meet.
IN_FILTER = """\
select key from (
  select news_search_by_source.rowid & ${SOURCE_MASK} as key from sources cross join news_search_by_source
  where :q <> '' and :sources <> '' and sources.name in ${SOURCE_NAMES}
    and news_search_by_source match (select expr from by_source)
    and news_search_by_source.rowid >= sources.rowid << ${SOURCE_BITS}
    and news_search_by_source.rowid < (sources.rowid + 1) << ${SOURCE_BITS}
  union all
  ${TAG_ROWIDS})
limit ${FEW} + 1
"""

