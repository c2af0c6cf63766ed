"""The count of a news listing (``api_news_count``): its template, and its terms without a search, one per way in.

A template of :mod:`qsite.db.news_queries`, which fills in its fragments (the search expression,
``${COUNT}`` from :func:`count_terms`) and the search index's layout, as it does the pages'. Apart
from the pages' templates because a count reads other tables than a page does (the sums the
triggers keep, each source's range of ``news_search_by_source``, a tag's own table) and walks to
its limit, never to a page.
"""

from __future__ import annotations

#: The ways into the counts, as a page has them (:data:`qsite.db.news_arms.ARMS`), by what a term reads: its sums
#: (``counts``) or its items within one day (``news``), each ``(table, condition)``. Sums with no
#: source asked read ``news_totals`` (migration 11), whose tag ``''`` is every tag: no filter and a
#: tag are one way there, one range of its key (``tag = :tag``). Sums of sources read ``news_counts``
#: through ``news_counts_source``. Items: no filter (``news_newest``), a tag (``news_tag_newest``),
#: sources (``news_source_newest``) and sources with a tag (``news_source_tag_newest``), each index
#: holding all that its term reads (with ``(:tag = '' or tag = :tag)``, a term read each item's
#: row). Each term of :data:`COUNT_TERMS` is written once per way, behind the way's constant
#: condition, so only one runs. Not one CTE of the ways: SQLite (3.40) does not push a term's
#: conditions into a union inside a CTE, and the counts then read their tables whole
#: (docs/performance.md, "Measurements behind the code").
COUNT_WAYS = {
    "counts": (
        ("news_totals", "tag = :tag and :sources = ''"),
        ("news_counts", ":sources <> '' and (:tag = '' or tag = :tag)\n  and source in ${SOURCE_NAMES}"),
    ),
    "news": (
        ("news", ":tag = '' and :sources = ''"),
        # :tag <> '' skips the term at once when no tag is asked (tag = '' would look it up)
        ("news", ":tag <> '' and :sources = '' and tag = :tag"),
        ("news", ":sources <> '' and :tag = ''\n  and source in ${SOURCE_NAMES}"),
        ("news", ":sources <> '' and :tag <> '' and tag = :tag\n  and source in ${SOURCE_NAMES}"),
    ),
}

#: How many items match without a search: the items after ``since`` (the months wholly after its
#: month, the days wholly after its day in that month, a range count within its own day: one day's
#: items at most), less the same from ``until`` on. ``(sign, reads, condition)``: a sum of counts
#: kept by triggers or a count of ``news`` (:data:`COUNT_WAYS`).
COUNT_TERMS = (
    ("+", "counts", "span = 'month' and period > substr(:since, 1, 7)"),
    ("+", "counts", "span = 'day' and period > substr(:since, 1, 10) and period < substr(:since, 1, 7) || '-~'"),
    ("+", "news", ":since <> '' and published_at > :since and published_at < substr(:since, 1, 10) || 'T~'"),
    ("-", "counts", ":until <> '' and span = 'month' and period > substr(:until, 1, 7)"),
    ("-", "counts", "span = 'day' and period > substr(:until, 1, 10) and period < substr(:until, 1, 7) || '-~'"),
    ("-", "news", ":until <> '' and published_at >= :until and published_at < substr(:until, 1, 10) || 'T~'"),
)


def count_terms() -> str:
    """:data:`COUNT_TERMS`, each once per way of :data:`COUNT_WAYS`, as one sum."""
    terms = []
    for sign, reads, condition in COUNT_TERMS:
        what = "coalesce(sum(items), 0)" if reads == "counts" else "count(*)"
        for table, way in COUNT_WAYS[reads]:
            way = way.replace("\n", "\n   ")  # its second line under its first
            terms.append(f"{sign} (select {what} from {table}\n   where {way}\n     and {condition})")
    return "\n".join(terms)


#: How many items match; a search stops counting past :count_limit.
API_NEWS_COUNT = """\
with
  search (expr) as (
    ${SEARCH}),
  -- q in the column of the tag asked, for news_search_by_source (no facets there)
  by_source (expr) as (
    ${BY_SOURCE}),
  search_range (low, high) as (
    select iif(:until = '', -${OPEN_END}, -max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', :until) as integer) / 60)) << ${ROWID_BITS}),
           iif(:since = '', ${OPEN_END}, (1 - max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', :since) as integer) / 60))) << ${ROWID_BITS})),
  -- until's own minute ends at until_ends, since's begins at since_begins: past every key when unset
  edges (until_ends, since_begins) as (
    select iif(:until = '', -${OPEN_END}, low + ${MINUTE_STEP}), iif(:since = '', ${OPEN_END}, high - ${MINUTE_STEP})
    from search_range)
select case
  -- no range: FTS5 checks a range's ends at every row, even open ones
  -- limit +:count_limit, never a bare parameter: SQLite 3.50 and 3.51 as sqlean.py and pysqlite3-binary
  -- build them compile a statement again each time a bare parameter of its LIMIT is bound
  -- sources and no range: each source's own range of news_search_by_source, a source's share of its words'
  -- lists, where news_search's source terms walked the whole lists to their 1,001st match with the source
  when :q <> '' and :sources <> '' and :since = '' and :until = '' then min(:count_limit, coalesce((select sum((
    select count(*) from (
      select 1 from news_search_by_source
      where news_search_by_source match (select expr from by_source)
        and news_search_by_source.rowid >= sources.rowid << ${SOURCE_BITS}
        and news_search_by_source.rowid < (sources.rowid + 1) << ${SOURCE_BITS}
      limit +:count_limit)))
    from sources where name in ${SOURCE_NAMES}), 0))
  -- a tag, no source and no range: the tag's own table, a third of the entries in shorter lists, where
  -- news_search's column filter walked every tag's entries to keep the tag's
  when :q <> '' and :tag <> '' and :sources = '' and :since = '' and :until = '' then min(:count_limit, (select count(*) from (
    ${TAG_COUNT})))
  -- no filter and no range: the whole of news_search_by_source, whose keys of items in a row are a byte or two
  -- apart where news_search's (minute first) are six: shorter lists, walked a quarter to a third sooner (not
  -- with a tag: its items are in their sources' ranges, and a tag with few sources would walk the others first)
  when :q <> '' and :tag = '' and :since = '' and :until = '' then min(:count_limit, (select count(*) from (
    select 1 from news_search_by_source where news_search_by_source match :q limit +:count_limit)))
  when :q <> '' and :since = '' and :until = '' then min(:count_limit, (select count(*) from (
    select 1 from news_search where news_search match (select expr from search) limit +:count_limit)))
  when :q <> '' then min(:count_limit, (select count(*) from (
    select 1 from news_search
    where news_search match (select expr from search)
      and rowid >= (select low from search_range) and rowid < (select high from search_range)
      -- since's and until's own minutes less their items outside the range, in the same scan (a few
      -- rows, each looked up), not a MATCH of their own: FTS5 bounds an AND's walk by its matches, not
      -- by the rowid range (from its lists' first entries to a first match, and on to the next match
      -- past the range), so a narrow range of a sparse AND (a word in no item of a source) walked both lists
      and not (rowid >= (select since_begins from edges)
               and (select published_at <= :since from news where news.rowid = news_search.rowid & ${ROWID_MASK}))
      and not (rowid < (select until_ends from edges)
               and (select published_at >= :until from news where news.rowid = news_search.rowid & ${ROWID_MASK}))
    limit +:count_limit)))
  else max(0,
    ${COUNT})
  end as count
"""
