"""The uncached path at a million items: distinct requests, each a miss of the response cache.

1. the database: a million news items (:mod:`bench.newsdb`, through the
   storage layer's bulk insert) and the bundled catalog (``qsite ingest site``);
2. the requests, written up front (:func:`write_requests`), every one once in
   its canonical form, so none can be answered from the cache, in two mixes:
   random combinations of ``tag``, ``since``, ``until``, ``source`` and
   ``cursor`` on /api/v1/news with news searches and glossary searches
   (``q``) among them; and news searches alone (``q`` with the same filters;
   see ``api_news`` in metadata.yml). Each also as the same query to Datasette's
   own table JSON (``/<db>/news.json?tag=...&published_at__gt=...&_sort_desc=published_at&_size=20&_next=...``);
3. ``qsite serve`` on that database (one worker, limiter on, pinned like the
   cached benchmark's) and ``wrk`` walking each list with
   :file:`bench/wrk_walk.lua`: every run starts where the last one stopped, the
   targets in turn, round after round, each round ending with granian raw
   replaying a news page of the same database on the same core (the ceiling
   the rates are judged against, round by round);
4. the same server under open-loop load (:mod:`bench.open_loop`, k6): the
   highest arrival rate at which p99 stays within 25 ms, for the mix and for
   searches alone, from request lists of their own (``--skip open-loop`` leaves it out);
5. the serving process's memory (``VmHWM``, ``VmRSS``) after all of it, and a
   check that the counts the API answered are the table's.
"""

from __future__ import annotations

import argparse
import json
import random
import sqlite3
import statistics
import time
from collections import Counter
from dataclasses import dataclass, replace
from pathlib import Path
from urllib.parse import urlencode

import httpx
from datasette.utils import tilde_encode

from bench import newsdb, user_searches
from bench.harness import (NEWS, PeakMemory, Processes, bench_cursor_key, disk_read_bytes, hold_resident, mapped_file_kb,
                           memory_kb, news_config, qsite, start_qsite, start_raw, wait_idle)
from bench.open_loop import bench_open_loop
from bench.profiling import profile_serving
from bench.servers import log, record_responses, run_wrk
from bench.sql_timing import LISTED_PER_TIMED, time_news_sql, time_search_kinds
from bench.stages import time_stages
from bench.stalls import rate_after_stalls
from qsite.db.model import TAGS
from qsite.service.api.bodies import Build
from qsite.service.api.cursors import Position, encode_cursor
from qsite.service.api.data_versions import read_versions
from qsite.service.api.endpoints import ENDPOINTS
from qsite.service.api.news_bodies import SEARCH_COUNT_MAX, news_filters, with_count_limit
from qsite.service.api.parameters import parse_params
from qsite.service.api.reader import connect_read_only
from qsite.service.datasette.metadata import configured_queries, query_sql

#: Items per page, in both: the API's default limit and Datasette's ``_size``.
PAGE = 20
#: Shares of the mixed requests that are glossary searches and news searches; the rest are news pages.
GLOSSARY_SHARE = 0.1
NEWS_SEARCH_SHARE = 0.2
#: Datasette's table JSON takes a good part of a second per request at a million
#: items (its count and facets read every match), so 32 connections would wait
#: longer than a round for their first answers. It is driven with fewer
#: connections, for longer: its throughput is what it can do on one core either way.
DATASETTE_CONNECTIONS = 4
DATASETTE_SECONDS = 15
#: The target of each round that is the ceiling the uncached rates are judged against (issue 27).
RAW_CEILING = "granian raw news"
#: Seconds a request may take before wrk counts it as a timeout.
TIMEOUT = {"qsite": 5, "datasette": 30}
#: The two mixes of requests: news pages (tag, since, until, source, cursor), news searches
#: and glossary searches, mixed; and news searches alone (q, with the same filters at random).
MIXES = ("pages", "search")
#: Searches of each kind timed (and as many before them, on the same connection), by each of the SQL timing's two runs.
SQL_KIND_REQUESTS = 1000
#: The same for each kind of search users send (bench.user_searches: 16 kinds), and the p99 each is held to.
SQL_USER_KIND_REQUESTS = 1000
USER_KIND_LIMIT_MS = 2.0
#: The kinds of ``q`` whose SQL the timing guard reports apart (issue 27: any q, p99 within 5 ms at a
#: million items). q's syntax is text (docs/api.md), so a phrase is its words and ``quant*`` the word
#: ``quant``: they are the kinds below. "a very common word" is one of the ten most frequent words in
#: the sampled items' text ("the", "to", "quantum"), whose lists hold most of the index.
SEARCH_KINDS = ("one word", "two words of one item", "two words", "a very common word",
                "a very common word and a rare one", "a word in no item",
                # q's operators (qsite.service.api.search_language.parse_search): OR merges lists; an excluded
                # word that nearly every match has walks the included word's whole list
                "one word or another", "a word without a very common one")
#: Kinds held to a request's bound, not to issue 27's 5 ms for any q (its list: words, phrases,
#: prefixes, common words, a word in no item): excluding a word that nearly every match has makes
#: FTS5 walk the included word's whole list, a seek into the excluded one's for each entry; only
#: terms for the absence of words in the index would make it cheaper (docs/performance.md).
EXCLUDING_KINDS = ("a word without a very common one",)


@dataclass(frozen=True)
class NewsRequest:
    """One /api/v1/news query; ``None`` is a parameter not given."""

    tag: str | None = None
    since: str | None = None
    until: str | None = None
    sources: tuple[str, ...] = ()
    cursor: Position | None = None
    q: str | None = None

    def api_path(self) -> str:
        query = [("tag", self.tag), ("since", self.since), ("until", self.until)]
        query += [("source", name) for name in self.sources]
        query += [("cursor", self.cursor and encode_cursor(*self.cursor)), ("q", self.q)]
        return "/api/v1/news?" + urlencode([(k, v) for k, v in query if v is not None])

    def datasette_path(self, db_name: str) -> str:
        """The same query as Datasette's table JSON: same filters, page size and position."""
        query = [("tag", self.tag), ("published_at__gt", self.since), ("published_at__lt", self.until)]
        if self.sources:
            query.append(("source__in", json.dumps(list(self.sources))))
        if self.q:
            query.append(("_search", self.q))
        query += [("_sort_desc", "published_at"), ("_size", str(PAGE))]
        if self.cursor:
            query.append(("_next", f"{tilde_encode(self.cursor[0])},{tilde_encode(self.cursor[1])}"))
        return f"/{db_name}/news.json?" + urlencode([(k, v) for k, v in query if v is not None])


@dataclass(frozen=True)
class GlossaryRequest:
    q: str

    def api_path(self) -> str:
        return "/api/v1/glossary?" + urlencode({"q": self.q})

    def datasette_path(self, db_name: str) -> str:
        return f"/{db_name}/glossary.json?" + urlencode({"_search": self.q, "_sort": "term"})


@dataclass(frozen=True)
class ItemRequest:
    """GET /api/v1/news/{id}: one item by its id (issue 26)."""

    item_id: str

    def api_path(self) -> str:
        return f"/api/v1/news/{self.item_id}"


@dataclass(frozen=True)
class SyncRequest:
    """A mirror's first page of what changed since a time (``updated_since``), with a tag or sources at random."""

    updated_since: str
    tag: str | None = None
    sources: tuple[str, ...] = ()

    def api_path(self) -> str:
        query = [("updated_since", self.updated_since), ("tag", self.tag), *(("source", name) for name in self.sources)]
        return "/api/v1/news?" + urlencode([(k, v) for k, v in query if v is not None])


#: The API-only mixes (no Datasette reference): single items, and sync pages by updated_since.
API_ONLY_MIXES = ("item", "sync")


class Sample:
    """What random requests are made of, read from the database once."""

    def __init__(self, db: Path, count: int, rng: random.Random):
        with sqlite3.connect(db) as conn:
            low, high, last = conn.execute(
                "SELECT strftime('%s', min(published_at)), strftime('%s', max(published_at)), max(rowid) FROM news"
            ).fetchone()
            picks = json.dumps(rng.sample(range(1, last + 1), min(last, count)))
            self.items = conn.execute(
                "SELECT published_at, id, title || ' ' || summary FROM news WHERE rowid IN (SELECT value FROM json_each(?))",
                [picks],
            ).fetchall()
            self.sources = [name for (name,) in conn.execute("SELECT name FROM sources ORDER BY name")]
            glossary = " ".join(t + " " + d for t, d in conn.execute("SELECT term, definition FROM glossary"))
        self.span = (int(low), int(high) + 1)
        self.glossary_words = sorted({w.lower() for w in glossary.split() if w.isalpha() and len(w) > 3})
        said = Counter(w.lower().strip(".,;:") for *_, text in self.items[:2000] for w in text.split())
        self.news_words = sorted(w for w in said if w.isalpha() and len(w) > 3)
        self.common_words = [w for w, _ in said.most_common() if w.isalpha()][:10]

    def time(self, rng: random.Random) -> str:
        return time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(rng.randrange(*self.span)))

    def news(self, rng: random.Random, search: bool) -> NewsRequest:
        since, until = sorted((self.time(rng), self.time(rng)))
        q = None
        if search:  # a word of a random item (common words often) or of the vocabulary (rare ones too)
            q = rng.choice(self.item_words(rng) if rng.random() < 0.5 else self.news_words)
        return NewsRequest(
            tag=rng.choice((None, *TAGS)),
            since=since if rng.random() < 0.5 else None,
            until=until if rng.random() < 0.25 else None,
            sources=tuple(rng.sample(self.sources, rng.choice((1, 2)))) if rng.random() < 0.25 else (),
            cursor=Position(*rng.choice(self.items)[:2]) if rng.random() < 0.5 else None,
            q=q,
        )

    def item_words(self, rng: random.Random) -> list[str]:
        """The words of a random item's title and summary (of four letters and more)."""
        said = [w.lower().strip(".,;:") for w in rng.choice(self.items)[2].split()]
        return [w for w in said if w.isalpha() and len(w) > 3] or self.news_words

    def search_of_kind(self, rng: random.Random, kind: str) -> NewsRequest:
        """A news search whose ``q`` is of ``kind`` (:data:`SEARCH_KINDS`), its filters as :meth:`news` draws them."""
        if kind == "one word":
            q = rng.choice(self.item_words(rng))
        elif kind == "two words of one item":
            words = sorted(set(self.item_words(rng)))
            q = " ".join(rng.sample(words, 2)) if len(words) > 1 else words[0]
        elif kind == "two words":
            q = " ".join(rng.sample(self.news_words, 2))
        elif kind == "a very common word":
            q = rng.choice(self.common_words)
        elif kind == "a very common word and a rare one":
            q = f"{rng.choice(self.common_words)} {rng.choice(self.news_words)}"
        elif kind == "a word in no item":  # no real word has a "q" then a "z"
            q = "qz" + "".join(rng.choice("bcdfghjklm") for _ in range(6))
        elif kind == "one word or another":
            q = " OR ".join(rng.sample(self.news_words, 2))
        elif kind == "a word without a very common one":
            q = f"{rng.choice(self.news_words)} -{rng.choice(self.common_words)}"
        else:
            raise ValueError(f"no search kind {kind!r}; the kinds are {', '.join(SEARCH_KINDS)}")
        return replace(self.news(rng, search=True), q=q)

    def item(self, rng: random.Random) -> ItemRequest:
        return ItemRequest(rng.choice(self.items)[1])

    def sync(self, rng: random.Random) -> SyncRequest:
        return SyncRequest(
            # each to the second, over the whole span: distinct, so each misses the cache
            updated_since=self.time(rng),
            tag=rng.choice((None, *TAGS)),
            sources=tuple(rng.sample(self.sources, 1)) if rng.random() < 0.25 else (),
        )

    def glossary(self, rng: random.Random) -> GlossaryRequest:
        return GlossaryRequest(" ".join(rng.sample(self.glossary_words, rng.choice((1, 1, 2)))))


class CarriedCounts:
    """Cursors as ``qsite serve`` writes them into next links: each with its listing's count, sealed.

    A client has a cursor only from a ``next`` link, and since the counts rode
    along (:mod:`qsite.service.api.cursors`) every such link carries its listing's
    count. The bench's cursors are made the same way, by the API's own code
    (:class:`~qsite.service.api.bodies.Build`) with the servers' secret
    (:data:`bench.harness.BENCH_SECRET`), over the data the servers serve.
    """

    def __init__(self, db: Path):
        self.endpoint = ENDPOINTS["news"]
        self.sql = query_sql(configured_queries())
        self.conn = connect_read_only(db)
        self.versions = read_versions(self.conn)
        self.key = bench_cursor_key()

    def sealed(self, request: NewsRequest) -> NewsRequest:
        if request.cursor is None:
            return request
        values, errors = parse_params(self.endpoint.params, replace(request, cursor=None).api_path().partition("?")[2].encode())
        if errors:
            raise SystemExit(f"bench: {request.api_path()} is not a valid news request: {errors}")
        build = Build(self.endpoint, values, None, self.conn, self.sql, self.versions, self.key)
        params = with_count_limit(news_filters(values))
        position = build.after(request.cursor[0], request.cursor[1], False, "news_count", params, build.count("news_count", params))
        return replace(request, cursor=position)

    def close(self) -> None:
        self.conn.close()


def write_requests(db: Path, count: int, work: Path, db_name: str, mix: str, seed: int = 15,
                   prefix: str = "uncached") -> tuple[Path, Path, list]:
    """``count`` distinct requests of ``mix`` (:data:`MIXES`), as /api/v1 paths and as Datasette paths, one file each.

    Times are uniform over the items' span; cursors are the positions of items
    picked at random, as a client paging from them would send, and carry their
    listing's count as the ``next`` links a client has them from would
    (:class:`CarriedCounts`); sources are one or two publishers; glossary
    searches are one or two words of the glossary's own text, news searches a
    word of an item's title or summary.
    """
    rng = random.Random(f"{seed}-{mix}")
    sample = Sample(db, count, rng)

    def draw():
        share = rng.random()
        if mix in API_ONLY_MIXES:
            return getattr(sample, mix)(rng)
        if mix == "pages" and share < GLOSSARY_SHARE:
            return sample.glossary(rng)
        if mix == "search" or share < GLOSSARY_SHARE + NEWS_SEARCH_SHARE:
            return user_searches.search(sample, rng)  # as users send them: shapes and filters with their shares
        return sample.news(rng, search=False)

    ordered = sealed(db, distinct(draw, count, f"the {mix} mix over {len(sample.items):,} items"))
    api, datasette = work / f"{prefix}-{mix}-api.txt", work / f"{prefix}-{mix}-datasette.txt"
    api.write_text("\n".join(r.api_path() for r in ordered) + "\n", encoding="utf-8")
    if mix not in API_ONLY_MIXES:
        datasette.write_text("\n".join(r.datasette_path(db_name) for r in ordered) + "\n", encoding="utf-8")
    return api, datasette, ordered


def distinct(draw, count: int, what: str) -> list:
    """``count`` distinct requests from ``draw()``, in the order first drawn; an error, not a hang, when there are fewer.

    A mix over few items has few distinct requests (single items: one each), and
    drawing on would never end. Drawing the last of ``count`` equally likely
    requests takes ``count`` draws on average (all of them, ``count`` times the
    logarithm of ``count``): after twenty times ``count`` draws in a row that are
    all repeats (odds of e**-20 that a last one was still to come), it stops and
    says which mix and how many it found.
    """
    requests: dict = {}
    repeats = 0
    while len(requests) < count:
        request = draw()
        repeats = 0 if request not in requests else repeats + 1
        if repeats > 20 * count:
            raise SystemExit(f"bench: {what} gives only about {len(requests):,} distinct requests, not {count:,}: "
                             "raise --uncached-items or lower --uncached-requests")
        requests.setdefault(request, None)
    return list(requests)


def sealed(db: Path, requests: list) -> list:
    """``requests`` with each news cursor sealed over its count, as a next link has it (:class:`CarriedCounts`)."""
    carried = CarriedCounts(db)
    try:
        return [carried.sealed(r) if isinstance(r, NewsRequest) else r for r in requests]
    finally:
        carried.close()


def write_search_kinds(db: Path, count: int, work: Path, seed: int = 31, users: bool = False) -> dict[str, Path]:
    """``count`` distinct news searches of each kind of :data:`SEARCH_KINDS` as /api/v1 paths, a file each.

    With ``users``, of each kind users send instead (:func:`bench.user_searches.kinds`).
    """
    rng = random.Random(f"{seed}-{'users' if users else 'kinds'}")
    sample = Sample(db, count, rng)
    files = {}
    for n, kind in enumerate(user_searches.kinds() if users else SEARCH_KINDS):
        draw = (lambda: user_searches.search(sample, rng, kind)) if users else (lambda: sample.search_of_kind(rng, kind))
        found = sealed(db, distinct(draw, count, f"searches of {kind}"))
        files[kind] = work / f"search-{'user' if users else 'kind'}-{n}-api.txt"
        files[kind].write_text("\n".join(r.api_path() for r in found) + "\n", encoding="utf-8")
    return files


def check_counts(base: str, db: Path, requests: list, checks: int = 6) -> list[dict]:
    """The API's ``count`` for a few news requests against ``count(*)`` over the table itself."""
    checked = []
    with sqlite3.connect(db) as conn, httpx.Client(base_url=base, timeout=60) as client:
        for request in [r for r in requests if isinstance(r, NewsRequest)][:checks]:
            expected = conn.execute(
                """SELECT count(*) FROM news WHERE (:tag IS NULL OR tag = :tag) AND published_at > coalesce(:since, '')
                   AND (:until IS NULL OR published_at < :until)
                   AND (:sources = '[]' OR source IN (SELECT value FROM json_each(:sources)))
                   AND (:q IS NULL OR rowid IN (SELECT rowid FROM news_fts WHERE news_fts MATCH '"' || :q || '"'))""",
                {"tag": request.tag, "since": request.since, "until": request.until,
                 "sources": json.dumps(list(request.sources)), "q": request.q},
            ).fetchone()[0]
            body = client.get(request.api_path()).json()
            answered = body["count"] if body["count_exact"] else f"{body['count']}+"
            if expected > SEARCH_COUNT_MAX and request.q:  # a search stops counting there
                expected = f"{SEARCH_COUNT_MAX}+"
            if answered != expected:
                raise SystemExit(f"bench: {request.api_path()} counted {answered}, the table has {expected}")
            checked.append({"path": request.api_path(), "count": answered})
    return checked


def ratio(ours: list[dict], theirs: list[dict]) -> float | None:
    """Median over rounds of our req/s over theirs; rounds where they answered nothing are left out."""
    found = [a["rps"] / b["rps"] for a, b in zip(ours, theirs) if b["rps"] > 0]
    return statistics.median(found) if found else None


def bench_uncached(args, procs: Processes, work: Path, results: dict) -> None:
    """Build the database, start ``qsite serve`` on it, and walk the request lists round after round."""
    if args.uncached_db is not None:  # built before by bench.newsdb (its catalog is ingested again below)
        db = args.uncached_db
        log(f"uncached: using the database built before at {db}")
        with sqlite3.connect(db) as conn:
            by_tag = dict(conn.execute("SELECT tag, count(*) FROM news GROUP BY tag").fetchall())
        built = {"items": sum(by_tag.values()), "news_by_tag": by_tag, "seconds": 0.0, "reused": str(db)}
    else:
        db = work / "million.db"
        log(f"uncached: building a {args.uncached_items:,}-item database through the storage layer's bulk insert")
        built = newsdb.build(db, args.uncached_items)
    config = news_config(work / "million.yml", db, [])
    started = time.perf_counter()
    qsite("ingest", "site", "--config", str(config))
    built["ingest_site_s"] = time.perf_counter() - started
    built["db_mb"] = db.stat().st_size / 1e6
    log(f"uncached: built in {built['seconds']:.0f} s ({built['db_mb']:.0f} MB); writing {args.uncached_requests:,} requests")
    held, holder = hold_resident(procs, db, work / "vmtouch.log")
    log(f"uncached: {held['held_mb']:.0f} MB of the database held in the page cache" + (f" ({held['why']})" if "why" in held else ""))
    server, base, _ = start_qsite(args, procs, work, "million", config, 1, args.server_core)
    held_memory = PeakMemory(server.pid, db)  # its RSS less the database's map (api.mmap_size), sampled
    server_read_before = disk_read_bytes(server.pid)
    db_name = next(iter(httpx.get(base + "/-/databases.json", timeout=30).json()))["name"]
    targets, requests = {}, {}
    for mix, name in zip(MIXES, ("uncached", "uncached search")):
        count = args.uncached_requests if mix == "pages" else args.uncached_requests // 4
        api_file, datasette_file, requests[mix] = write_requests(db, count, work, db_name, mix)
        targets[name] = api_file
        targets[f"datasette {name}"] = datasette_file
    for mix in API_ONLY_MIXES:  # issue 26: one item by id, and a mirror's sync pages, uncached like /news
        # single items are answered about four times as fast as pages (13,000/s at a million): twice
        # the requests, or their walk runs out before its rounds end
        count = 2 * args.uncached_requests if mix == "item" else args.uncached_requests
        targets[f"uncached {mix}"], _, requests[mix] = write_requests(db, count, work, db_name, mix)
    for name, file in targets.items():
        first = httpx.get(base + file.open(encoding="utf-8").readline().strip(), timeout=60)
        if first.status_code != 200:
            raise SystemExit(f"bench: {name} answered {first.status_code}: {first.text[:300]}")
    # Issue 27's ceiling, side by side: granian raw replaying a news page of this database, on the
    # server's core, run in every round between the walks. Against the cached rounds' ceiling, minutes
    # earlier, the ratio moved with the neighbours' load (granian raw 22,000 to 30,000/s run to run).
    record_responses(base, {"news": NEWS}, work / "responses-million.json")
    raw = start_raw(procs, "granian", args.server_core, work / "responses-million.json", work / "raw-million.log")
    position = {name: 1 for name in targets}
    runs: dict[str, list] = {name: [] for name in (*targets, RAW_CEILING)}

    def walk(name: str, seconds: float) -> dict:
        if name == RAW_CEILING:
            return run_wrk(args, raw.base + NEWS, seconds, timeout=TIMEOUT["qsite"])
        load = args
        if name.startswith("datasette"):
            load = argparse.Namespace(**{**vars(args), "connections": DATASETTE_CONNECTIONS})
            seconds = max(seconds, DATASETTE_SECONDS)
        timeout = TIMEOUT["datasette" if name.startswith("datasette") else "qsite"]
        result = run_wrk(load, base, seconds, walk=(targets[name], position[name]), timeout=timeout)
        if result["ran_out"]:
            raise SystemExit(f"bench: {name} used up its distinct requests; raise --uncached-requests")
        position[name] = result["walked_to"]
        result["idle_after_s"] = wait_idle(server.pid)  # Datasette works on for seconds after wrk stops
        return result

    for name in runs:
        walk(name, args.warmup)
    for round_no in range(args.rounds):
        for name in runs:
            runs[name].append(walk(name, args.duration))
        log(f"uncached round {round_no + 1}/{args.rounds}: " + ", ".join(f"{n} {r[-1]['rps']:.0f}/s" for n, r in runs.items()))
    summary = {
        name: {
            "rps": statistics.median(r["rps"] for r in rounds),
            "p50_ms": statistics.median(r["p50_ms"] for r in rounds),
            "p99_ms": statistics.median(r["p99_ms"] for r in rounds),
            "over_25ms_pct": statistics.median(r["over_25ms_pct"] for r in rounds),
            "errors": sum(r["errors"] for r in rounds),
            "requests_walked": position.get(name, 1) - 1,
            "rounds": rounds,
        }
        for name, rounds in runs.items()
    }
    # The closed loop's memory, before the open loop overloads the server on purpose (its steps past the
    # highest rate hold up to a thousand connections and their queued answers): the bound is for this one.
    closed_mem = memory_kb(server.pid)
    closed_peak_less_db = held_memory.stop()
    closed_db_mapped = max(mapped_file_kb(pid, db) for pid in closed_mem)
    stalls = None
    if "stalls" not in args.skip:
        log("uncached: the pages walked before, while and after the server is stopped now and then")
        stalls = rate_after_stalls(lambda seconds: walk("uncached", seconds), server.pid, args.duration)
    open_loop = None
    if "open-loop" not in args.skip:
        # New request lists (another seed): none of their paths was asked before, so none is cached. Twice
        # the closed loop's: the rate search's steps at up to 3,200/s asked for more than 200,000 pages.
        count = 2 * args.uncached_requests
        files = {name: write_requests(db, count, work, db_name, mix, seed=27, prefix="open")[0]
                 for mix, name in zip(MIXES, ("uncached", "uncached search"))}
        open_loop = bench_open_loop(base, files, args.client_core, work, count)
    if args.profile:
        log("profiling the uncached path with py-spy")
        profiled = [{"name": "uncached", "url": base, "walk": (targets["uncached"], position["uncached"])}]
        results["profile_serve"] = results.get("profile_serve", {}) | profile_serving(args, server.pid, profiled, args.out, ("uncached",))
    procs.stop(raw)
    mem = memory_kb(server.pid)
    counts_checked = check_counts(base, db, requests["pages"]) + check_counts(base, db, requests["search"], 2)
    held["server_disk_read_mb"] = round((disk_read_bytes(server.pid) - server_read_before) / 1e6, 1)
    procs.stop(server)  # the SQL is timed alone, with the cores to itself
    log("uncached: timing each request's SQL alone (page and count)")
    sql_timing = time_news_sql(db, [targets["uncached"], targets["uncached search"]])
    log("uncached: timing the SQL of each kind of search alone")
    sql_kinds = time_search_kinds(db, write_search_kinds(db, LISTED_PER_TIMED * SQL_KIND_REQUESTS, work), SQL_KIND_REQUESTS)
    log("uncached: timing the SQL of each kind of search users send, alone")
    user_kinds = time_search_kinds(db, write_search_kinds(db, LISTED_PER_TIMED * SQL_USER_KIND_REQUESTS, work, users=True),
                                   SQL_USER_KIND_REQUESTS, limit_ms=USER_KIND_LIMIT_MS)
    log("uncached: timing the Python of a request stage by stage")
    stages = {name: time_stages(db, targets[name]) for name in ("uncached", "uncached search")}
    if holder is not None:
        procs.stop(holder)
    results["uncached"] = {
        "database": built,
        "held_in_page_cache": held,
        "requests": {mix: len(listed) for mix, listed in requests.items()},
        "share_glossary": GLOSSARY_SHARE,
        "share_news_search": NEWS_SEARCH_SHARE,
        "targets": summary,
        "open_loop": open_loop,
        "stalls": stalls,
        "vs_datasette": {name: ratio(runs[name], runs[f"datasette {name}"]) for name in ("uncached", "uncached search")},
        "vs_raw": {name: ratio(runs[name], runs[RAW_CEILING]) for name in ("uncached", "uncached search")},
        "counts_checked": counts_checked,
        "sql_ms": sql_timing,
        "sql_search_kinds_ms": sql_kinds,
        "sql_user_search_kinds_ms": user_kinds,
        "stages_us": stages,
        "user_search_shares": {kind: user_searches.share(kind) for kind in user_searches.kinds()},
        "memory": {
            "processes": closed_mem,
            "peak_mb": max(m["hwm_kb"] for m in closed_mem.values()) / 1024,
            "rss_mb": max(m["rss_kb"] for m in closed_mem.values()) / 1024,
            # the bound's: the process's own, the database's mapped pages (the page cache) left out
            "peak_less_db_mb": max(closed_peak_less_db.values()) / 1024,
            "db_mapped_mb": closed_db_mapped / 1024,
            # after the open loop too, overload steps included
            "after_open_loop_peak_mb": max(m["hwm_kb"] for m in mem.values()) / 1024,
        },
    }
