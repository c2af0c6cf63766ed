"""The news queries the API runs, written once with the search index's layout by name.

``api_news``, ``api_news_oldest`` and ``api_news_count`` in ``datasette.yaml`` are
generated from the templates here (``make cog``; ``tests/test_news_queries.py``
fails while the file differs): the ``news_search`` rowid layout
(:data:`qsite.db.news_derived.SEARCH_ROWID_BITS`), the clamp of a minute and the open
ends of a range come from :mod:`qsite.db.news_derived`, the tag columns from
:data:`qsite.db.model.TAGS`, and the search expression (:data:`SEARCH`) is written
once for the three. ``datasette.yaml`` keeps the generated text, numbers
written out, so researchers read and run in Datasette what the API runs, and
plain Datasette needs nothing of this module. For a page the API runs the lines
of that text its way in reads (:func:`by_way`, :func:`qsite.db.news_arms.way_in`): the
arms of the other ways (:mod:`qsite.db.news_arms`), whose constant conditions are false
for it, left out. The count's own template and terms are in :mod:`qsite.db.news_count`.

:class:`string.Template` (``${NAME}``), not ``str.format``: the SQL holds
braces of its own (FTS5's column filters, ``{science}: ...``).
"""

from __future__ import annotations

from operator import itemgetter
from string import Template

from qsite.db.news_arms import ARMS, WAYS
from qsite.db.news_count import API_NEWS_COUNT, count_terms
from qsite.db.news_derived import (
    MINUTE_MAX,
    MONTH_TERM,
    SEARCH_OPEN_END,
    SEARCH_ROWID_BITS,
    SEARCH_ROWID_MASK,
    SEARCH_TAG_COLUMNS,
    SOURCE_ROWID_BITS,
)
from qsite.db.news_search_filters import BY_SOURCE, FEW_MATCHES, IN_FILTER, tag_arms

#: A page's search of words ANDed whose ``since`` is in one of the last this many months of its
#: range (up to ``until`` or the newest item) ANDs those months' terms (:data:`IN_MONTHS`). With
#: more, the months' lists cost more than the walk past the range they save: each step of the AND
#: seeks in them too (docs/performance.md, "A recent since").
MONTHS_MAX = 3

#: The names the templates use, and their values.
LAYOUT = {
    "ROWID_BITS": str(SEARCH_ROWID_BITS),
    # a news_search rowid & ROWID_MASK is the item's news rowid
    "ROWID_MASK": str(SEARCH_ROWID_MASK),
    # one minute's span of news_search rowids
    "MINUTE_STEP": str(SEARCH_ROWID_MASK + 1),
    # a minute is clamped to 26 bits and a sign (years 1842 to 2097)
    "MINUTE_MAX": str(MINUTE_MAX),
    # past every key: an open end of a rowid range (an unset since or until)
    "OPEN_END": str(SEARCH_OPEN_END),
    "TAG_COLUMNS": ", ".join(f"'{column}'" for column in SEARCH_TAG_COLUMNS),
    # a news_search_by_source rowid >> SOURCE_BITS is the source's rowid in sources, & SOURCE_MASK the item's news rowid
    "SOURCE_BITS": str(SOURCE_ROWID_BITS),
    "SOURCE_MASK": str((1 << SOURCE_ROWID_BITS) - 1),
    # a search with sources and at most this many matches in them: its page sorted from them all
    "FEW": str(FEW_MATCHES),
    # the names of the sources asked (a JSON array; '' is none), as a list to test a name against
    "SOURCE_NAMES": "(select value from json_each(iif(:sources = '', '[]', :sources)))",
    "MONTHS_MAX": str(MONTHS_MAX),
    # the term of each month a page's search ANDs, as news_search's facets hold it
    "MONTH_TERM": MONTH_TERM.format(time="month"),
}

#: q in the column of the tag asked: the first part of :data:`SEARCH`.
SCOPED = """case when :tag = '' then '- facets: (' || :q || ')'
       when lower(:tag) in (${TAG_COLUMNS}) then '{' || lower(:tag) || '}: (' || :q || ')'
       else '""' end"""

#: The MATCH expression of a search: q in the column of the tag asked (any tag: every column but
#: facets), AND the sources' facet terms. A tag that is no column matches nothing. :q is already an
#: FTS5 expression (qsite.service.api.search_language.fts_query: quoted words, OR and NOT); in parentheses, the
#: column filter applies to all of it, the words it excludes too.
SEARCH_TERMS = SCOPED + """ || case
  when :tag <> '' and :sources <> '' then ' AND facets: (' || coalesce((select group_concat('t' || rowid || lower(:tag), ' OR ')
    from sources where name in ${SOURCE_NAMES}), 's0') || ')'
  when :sources <> '' then ' AND facets: (' || coalesce((select group_concat('s' || rowid, ' OR ')
    from sources where name in ${SOURCE_NAMES}), 's0') || ')'
  else '' end"""
SEARCH = "select " + SEARCH_TERMS + "\n"

#: What a page's search (not its count) ANDs to :data:`SEARCH`: for words ANDed (``"a" "b"``, as
#: fts_query writes them) or a word less another (``("a") NOT ("b")``) with a ``since`` at most
#: :data:`MONTHS_MAX` months before the range's end (``until``, or the newest item), the terms of those
#: months (:data:`qsite.db.news_derived.MONTH_TERM`). FTS5 walks an AND or a NOT from its lists' first
#: entries to each match, and past the range's end when no match is left in it: words that never meet
#: after a recent ``since`` walked the whole index (8 ms at a million items), and so did a word less
#: another found with it in every item (23 ms); the months' lists end with the range. A page that is
#: not full is its own count, so such a search runs no count. The count does not take them: each step
#: of an AND seeks in the months' lists too, and a count steps to its 1,001st match (docs/performance.md,
#: "A recent since").
IN_MONTHS = """\
case when :since <> '' and (instr(:q, '" "') or instr(:q, ' AND ') or instr(:q, ') NOT (')) then coalesce((
  with recursive months (month) as (
    select date(:since, 'start of month')
    union all
    select date(month, '+1 month') from months
    where month < date(coalesce(nullif(:until, ''), (select max(published_at) from news)), 'start of month')
    limit ${MONTHS_MAX} + 1)
  select ' AND facets: (' || group_concat(${MONTH_TERM}, ' OR ') || ')' from months
  having count(*) <= ${MONTHS_MAX}), '') else '' end"""

#: The included and the excluded side of a word less another, ``(a) NOT (b)``: fts_query's only NOT, at its top.
INCLUDED = "substr(:q, 2, instr(:q, ') NOT (') - 2)"
EXCLUDED = "substr(:q, instr(:q, ') NOT (') + 7, length(:q) - instr(:q, ') NOT (') - 7)"

#: A page's search: :data:`SEARCH` ANDed with :data:`IN_MONTHS`. A word less another takes the months
#: on its included side: FTS5 walks a NOT to its first match before an AND around it seeks in the
#: months' lists, so they must bound that walk itself. Any other search runs the expression it ran
#: before (a ``CASE`` whose first test fails at once: nothing more to evaluate).
PAGE_SEARCH = """\
-- a word alone, or words joined by OR, match at every entry of their lists: their walk stops at the range's end;
-- words ANDed, and a word less another, take the months of a recent since (on a NOT's included side)
select case when :since <> '' and instr(:q, ') NOT (') and ${IN_MONTHS} <> '' then
    '(' || """ + SEARCH_TERMS.replace(":q", INCLUDED) + """
    || ${IN_MONTHS}
    || ') NOT ' || """ + SCOPED.replace(":q", EXCLUDED) + """
  else """ + SEARCH_TERMS + """
    || ${IN_MONTHS} end
"""

#: Newest first: one arm per way in (no filter, a tag, sources, a search), the others skipped at
#: once by their constant conditions (datasette.yaml says how each reads its index).
API_NEWS = """\
with bound (upper, upper_id) as (
  select iif(:until <> '' and :until <= coalesce(nullif(:before, ''), '~'), :until, coalesce(nullif(:before, ''), '~')),
         iif(:until <> '' and :until <= coalesce(nullif(:before, ''), '~'), '', :before_id)
),
named (source) as (
  select value from json_each(iif(:sources = '' or :q <> '', '[]', :sources))
),
search (expr) as (
  ${PAGE_SEARCH}
),
by_source (expr) as (
  ${BY_SOURCE}
),
few (key) as materialized (
  ${IN_FILTER}
),
search_range (low, high) as (
  select iif(upper = '~', -${OPEN_END}, -max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', upper) as integer) / 60)) << ${ROWID_BITS}),
         iif(:since = '', ${OPEN_END}, (1 - max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', :since) as integer) / 60))) << ${ROWID_BITS})
  from bound
),
first (key) as materialized (
  select news_search.rowid from news_search
  -- an empty range (a cursor before since) reads nothing: FTS5 would still look for a first match;
  -- a filter that matches a few times: the page is sorted from those (few), news_search is not read (an
  -- empty phrase: FTS5 runs the MATCH whatever the other conditions)
  where :q <> '' and (select low < high from search_range)
    and news_search match (select iif(:sources = '' and :tag = '' or (select count(*) from few) > ${FEW}, expr, '""')
                           from search)
    and news_search.rowid >= (select low from search_range) and news_search.rowid < (select high from search_range)
    -- a key past the range's two edge minutes is in it by its minute alone; one in them, by its item's time,
    -- looked up: most pages look up no item here (the rows are read once, by the arms)
    and (news_search.rowid >= (select low from search_range) + ${MINUTE_STEP}
         and news_search.rowid < (select high from search_range) - ${MINUTE_STEP}
      or (select published_at > :since and (published_at, news.id) < (select upper, upper_id from bound)
          from news where news.rowid = news_search.rowid & ${ROWID_MASK}))
  order by news_search.rowid
  -- one match past the page: in another minute than the page's last, the page holds all of that minute's
  limit coalesce(nullif(:limit, ''), 20) + 1
),
ceiling (high) as (
  -- the rest of the last match's minute, when first holds a match past the page in the same minute as the
  -- one before it; else none (NULL: the rest arm's phrase is empty, and it reads nothing)
  select iif(count(*) > coalesce(nullif(:limit, ''), 20)
             and max(key) - (max(key) & ${ROWID_MASK}) = (select key - (key & ${ROWID_MASK}) from first order by key desc limit 1 offset 1),
             max(key) - (max(key) & ${ROWID_MASK}) + ${MINUTE_STEP}, null)
  from first
)
${ARMS}
order by published_at desc, id desc
limit coalesce(nullif(:limit, ''), 20)
"""

#: api_news the other way round (sort=published_at): the same arms over the same indexes, oldest first.
API_NEWS_OLDEST = """\
with bound (lower, lower_id) as (
  select iif(:since <> '' and :since >= :after, :since, :after),
         iif(:since <> '' and :since >= :after, '~', :after_id)
),
named (source) as (
  select value from json_each(iif(:sources = '' or :q <> '', '[]', :sources))
),
search (expr) as (
  ${PAGE_SEARCH}
),
by_source (expr) as (
  ${BY_SOURCE}
),
few (key) as materialized (
  ${IN_FILTER}
),
search_range (low, high) as (
  select iif(:until = '', -${OPEN_END}, -max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', :until) as integer) / 60)) << ${ROWID_BITS}),
         iif(lower = '', ${OPEN_END}, (1 - max(-${MINUTE_MAX}, min(${MINUTE_MAX}, cast(strftime('%s', lower) as integer) / 60))) << ${ROWID_BITS})
  from bound
),
first (key) as materialized (
  select news_search.rowid from news_search
  -- an empty range (a cursor after until) reads nothing: FTS5 would still look for a first match;
  -- a filter that matches a few times: the page is sorted from those (few), news_search is not read (an
  -- empty phrase: FTS5 runs the MATCH whatever the other conditions)
  where :q <> '' and (select low < high from search_range)
    and news_search match (select iif(:sources = '' and :tag = '' or (select count(*) from few) > ${FEW}, expr, '""')
                           from search)
    and news_search.rowid >= (select low from search_range) and news_search.rowid < (select high from search_range)
    -- a key past the range's two edge minutes is in it by its minute alone; one in them, by its item's time,
    -- looked up: most pages look up no item here (the rows are read once, by the arms)
    and (news_search.rowid >= (select low from search_range) + ${MINUTE_STEP}
         and news_search.rowid < (select high from search_range) - ${MINUTE_STEP}
      or (select published_at < iif(:until = '', '~', :until) and (published_at, news.id) > (select lower, lower_id from bound)
          from news where news.rowid = news_search.rowid & ${ROWID_MASK}))
  order by news_search.rowid desc
  -- one match past the page: in another minute than the page's last, the page holds all of that minute's
  limit coalesce(nullif(:limit, ''), 20) + 1
),
floor (low) as (
  -- the rest of the last match's minute, when first holds a match past the page in the same minute as the
  -- one before it; else none (NULL: the rest arm's phrase is empty, and it reads nothing)
  select iif(count(*) > coalesce(nullif(:limit, ''), 20)
             and min(key) - (min(key) & ${ROWID_MASK}) = (select key - (key & ${ROWID_MASK}) from first order by key limit 1 offset 1),
             min(key) - (min(key) & ${ROWID_MASK}), null)
  from first
)
${ARMS}
order by published_at, id
limit coalesce(nullif(:limit, ''), 20)
"""

TEMPLATES = {"api_news": API_NEWS, "api_news_oldest": API_NEWS_OLDEST, "api_news_count": API_NEWS_COUNT}

#: Each query's direction: the range of a page and its order (the arms of :data:`ARMS`).
DIRECTIONS = {
    "api_news": {
        "RANGE": "published_at > :since and (published_at, id) < (select upper, upper_id from bound)",
        "ORDER": "published_at desc, id desc",
        "REST_NEEDED": "(select high from ceiling) is not null",
        "REST": "  and news_search.rowid > coalesce((select max(key) from first), ${OPEN_END})\n"
        "  and news_search.rowid < coalesce((select high from ceiling), -${OPEN_END})\n"
        "  and published_at > :since and (published_at, news.id) < (select upper, upper_id from bound)",
    },
    "api_news_oldest": {
        "RANGE": "published_at < iif(:until = '', '~', :until) and (published_at, id) > (select lower, lower_id from bound)",
        "ORDER": "published_at, id",
        "REST_NEEDED": "(select low from floor) is not null",
        "REST": "  and news_search.rowid < coalesce((select min(key) from first), -${OPEN_END})\n"
        "  and news_search.rowid >= coalesce((select low from floor), ${OPEN_END})\n"
        "  and published_at < iif(:until = '', '~', :until) and (published_at, news.id) > (select lower, lower_id from bound)",
    },
    "api_news_count": {},  # no page: no arms
}


#: The ways whose own arms the API runs without the query's last ``order by`` and ``limit``, and puts in
#: order itself (:func:`in_page_order`): theirs read at most a page, one match past it and the rest of a
#: minute, and sorting those few rows in Python costs a fraction of SQLite's sorter, which copies every
#: whole row into it (docs/performance.md, "Figures behind the API's limits").
SORTED_BY_CALLER = frozenset({"search", "filtered_search"})


def in_page_order(rows: list[dict], oldest_first: bool, limit: int) -> list[dict]:
    """``rows`` of a page query's arms in the page's order (``published_at``, then ``id``: the queries'
    ``order by``, each pair unique), the first ``limit`` of them; the list itself, sorted in place."""
    rows.sort(key=itemgetter("published_at", "id"), reverse=not oldest_first)
    del rows[limit:]
    return rows


def with_fragments(template: str, fragments: dict[str, str]) -> str:
    """``template`` with each ``${NAME}`` of ``fragments`` replaced, a fragment indented as the line it stands on;
    the layout's names are left for the caller."""
    lines = []
    for line in template.rstrip("\n").split("\n"):
        for key, fragment in fragments.items():
            if "${" + key + "}" in line:
                indent = " " * (len(line) - len(line.lstrip()))
                line = line.replace("${" + key + "}", fragment.replace("\n", "\n" + indent))
        lines.append(line)
    return "\n".join(lines)


def page_search() -> str:
    """:data:`PAGE_SEARCH` as both page queries run it: its months in, the layout's names replaced."""
    return Template(with_fragments(PAGE_SEARCH, {"IN_MONTHS": IN_MONTHS})).substitute(LAYOUT)


def render(name: str, way: str | None = None) -> str:
    """The SQL of the canned query ``name``, every name of the layout replaced by its value.

    :param way: one of :data:`WAYS`: only that way's arms (what the API runs for a page that
        takes it, :func:`qsite.db.news_arms.way_in`), without the last ``order by`` and ``limit``
        for :data:`SORTED_BY_CALLER`; by default every arm, the canned query.
    """
    tag_rowids = tag_arms("select rowid from ${TABLE} where ${MATCH}").replace("\n", "\n  ")
    fragments = {"SEARCH": Template(SEARCH.rstrip("\n")).substitute(LAYOUT), "COUNT": count_terms(),
                 "BY_SOURCE": Template(BY_SOURCE.rstrip("\n")).substitute(LAYOUT),
                 "IN_FILTER": Template(IN_FILTER.rstrip("\n")).substitute(LAYOUT, TAG_ROWIDS=tag_rowids),
                 "TAG_COUNT": tag_arms("select 1 from ${TABLE} where ${MATCH}") + "\nlimit +:count_limit"}
    fragments["PAGE_SEARCH"] = page_search()
    if DIRECTIONS[name]:
        arms = "union all\n".join(arm for ways, arm in ARMS if way is None or way in ways)
        fragments["ARMS"] = Template(arms.rstrip("\n")).safe_substitute(DIRECTIONS[name])  # the layout: below
    lines = with_fragments(TEMPLATES[name], fragments).split("\n")
    if way in SORTED_BY_CALLER:
        del lines[-2:]  # the template's last two lines: its "order by" and "limit"
    return Template("\n".join(lines)).substitute(LAYOUT)


def by_way(name: str, sql: str) -> dict[str, str]:
    """``{way: sql}``: each way's own arms of the canned query ``name`` (:func:`render` with ``way``),
    when ``sql``, its text as Datasette has it, is the generated one; none otherwise (a page query
    without arms, or one edited in ``datasette.yaml``, which then runs whole for every way).

    A page gets the same rows from its way's arms as from the whole query: the other arms'
    constant conditions are false for it (``tests/test_news_ways.py`` holds the two together).
    """
    if not DIRECTIONS.get(name) or sql != render(name):
        return {}
    return {way: render(name, way) for way in WAYS}


def yaml_block(name: str, indent: int = 8) -> str:
    """``sql: |-`` and the SQL of ``name``, indented for ``datasette.yaml`` (what cog writes there)."""
    pad = " " * indent
    body = "\n".join((pad + "  " + line) if line else "" for line in render(name).split("\n"))
    return f"{pad}sql: |-\n{body}"
