"""The arms of a news page, each with the ways in it serves, and the way a page's parameters take.

Templates of :mod:`qsite.db.news_queries` (its ``${NAME}`` layout, substituted there), which joins
them with ``union all`` into ``api_news`` and ``api_news_oldest``: every arm for the canned query,
one way's for a page that takes it (:func:`qsite.db.news_queries.render`). Apart so that the SQL of
the arms and the rule choosing among them are read side by side, in a module of one job.
"""

from __future__ import annotations

#: The arms of a news page, each with the ways in it serves (no filter, a tag, sources: each one's
#: page, then sorted; a search with a tag or sources, its few matches there; any search, its first
#: matches, then the rest of their last minute, whose range is the direction's ``${REST}``), each
#: behind its ways' constant conditions; ``${RANGE}`` and ``${ORDER}`` are the page's direction
#: (:data:`qsite.db.news_queries.DIRECTIONS`). The canned query holds them all; the API runs those
#: of the one way a page's parameters take (:func:`way_in`).
ARMS = (
    (("plain",), """\
select id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from news
where :tag = '' and :sources = '' and :q = ''
  and ${RANGE}
"""),
    (("tag",), """\
select id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from news
where tag = :tag and :sources = '' and :q = ''
  and ${RANGE}
"""),
    (("sources",), """\
select id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from news
-- the guard first: without it the arm's machinery (its list of rowids, its sort) is set up for no rows
where :sources <> '' and :q = '' and rowid in (
  select news.rowid from named join news on news.rowid in (
    select rowid from news
    where source = named.source and :tag = ''
      and ${RANGE}
    order by ${ORDER} limit coalesce(nullif(:limit, ''), 20))
  union all
  select news.rowid from named join news on news.rowid in (
    select rowid from news
    where source = named.source and tag = :tag
      and ${RANGE}
    order by ${ORDER} limit coalesce(nullif(:limit, ''), 20)))
"""),
    (("filtered_search",), """\
-- a search with a tag or sources that matches a few times in them: all of those, the page sorted from
-- them (by its keys alone, each whole row read once it is on the page)
select id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from news
where :q <> '' and (:sources <> '' or :tag <> '') and rowid in (
  select rowid from news
  -- more than a few: an empty list (a condition of the arm itself would still look up every key)
  where rowid in (select key from few where (select count(*) from few) <= ${FEW})
    and ${RANGE}
  order by ${ORDER} limit coalesce(nullif(:limit, ''), 20))
"""),
    (("search", "filtered_search"), """\
select news.id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from first cross join news on news.rowid = first.key & ${ROWID_MASK}
"""),
    (("search", "filtered_search"), """\
select news.id, title, url, source, summary, tag, published_at, image_url, authors, updated_at
from news_search cross join news on news.rowid = news_search.rowid & ${ROWID_MASK}
-- no rest of a minute to read (first holds every match of its last one's minute): an empty phrase, or FTS5
-- walks its lists again from their first entries to a match past the range (FTS5 bounds an AND by its matches)
where :q <> '' and news_search match (select iif(${REST_NEEDED}, expr, '""') from search)
${REST}
"""),
)

#: The ways into a page, in the order of their arms: each reads only its own arms' indexes.
WAYS = tuple(dict.fromkeys(way for ways, _ in ARMS for way in ways))


def way_in(params: dict) -> str:
    """The way into a page with the canned news query's ``params`` (``''`` is no filter): the one whose
    arms' constant conditions hold, the others' being false (a search's with a tag or sources, or
    with neither; sources' whatever the tag; a tag's; none).
    """
    if params["q"] != "":
        return "filtered_search" if params["sources"] != "" or params["tag"] != "" else "search"
    if params["sources"] != "":
        return "sources"
    return "tag" if params["tag"] != "" else "plain"
