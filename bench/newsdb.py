"""A benchmark database of a million news items, built in a minute through the storage layer.

Ingesting a million items the real way would take 20,000 feeds and an hour;
what the uncached benchmark (:mod:`bench.uncached`) needs is the data, so the
items are generated here and written by
:func:`qsite.pipeline.store.news.bulk_insert_items` in one transaction. They look
like real ones: a dozen publishers of all three tags (money headlines moved to
Investing as a rule would), times spread evenly over four years, and titles and
summaries of domain words and company names drawn with a Zipf-like skew, so a
full-text search can match a handful of items or a third of them.

Everything is seeded: two builds of the same size hold the same items.
"""

from __future__ import annotations

import itertools
import random
import time
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import Iterator

from bench.feeds import DETAILS, SENTENCES, SUBJECTS
from qsite.db.model import NEWS, format_time
from qsite.pipeline.news.normalise import entry_key
from qsite.pipeline.store.records import Item, item_id
from qsite.pipeline.store import bump_version, open_database, transaction
from qsite.pipeline.store import news as news_store
from qsite.pipeline.store import sources as sources_store

#: Publisher name, web host and the tag their items carry.
SOURCES = (
    ("Qubit Lab Notes", "labnotes.example.org", "Science"),
    ("Physics Preprint Digest", "preprints.example.org", "Science"),
    ("Cold Atoms Weekly", "coldatoms.example.net", "Science"),
    ("Error Correction Journal Club", "ecjc.example.edu", "Science"),
    ("Photonics Bulletin", "photonics.example.org", "Science"),
    ("Quantum Industry Wire", "industrywire.example.com", "Industry"),
    ("Cryo Hardware Report", "cryohw.example.com", "Industry"),
    ("Cloud Compute Times", "cloudtimes.example.com", "Industry"),
    ("Deep Tech Daily", "deeptech.example.com", "Industry"),
    ("Capital Brief", "capitalbrief.example.com", "Investing"),
    ("Venture Qubit", "venturequbit.example.com", "Investing"),
    ("Markets and Qubits", "marketsq.example.com", "Investing"),
)

#: Items are spread evenly over this span, ending when the database is built.
SPAN = timedelta(days=4 * 365)

#: The feeds' subjects and a few more.
_SUBJECTS = (*SUBJECTS, "magic state distillation", "quantum memories", "entanglement distribution", "dilution refrigerators")
_VERBS = (
    "demonstrates", "unveils", "reports", "doubles", "maps", "standardises", "scales", "extends",
    "cuts noise in", "benchmarks", "simulates", "licenses", "ships",
)
_MONEY = ("raises", "files for an IPO on")  # the pipeline's example rule moves these to Investing
_TOPICS = (
    "niobium", "tantalum", "transmon", "fluxonium", "resonator", "cryostat", "microwave", "laser", "photon",
    "ytterbium", "rubidium", "strontium", "calcium", "beryllium", "diamond", "vacancy", "graphene", "germanium",
    "decoherence", "crosstalk", "leakage", "readout", "tomography", "benchmarking", "compiler", "transpiler",
    "annealing", "optimisation", "chemistry", "catalyst", "battery", "pharmaceutical", "logistics", "finance",
    "cryptography", "lattice", "teleportation", "repeater", "satellite", "fibre", "interferometer", "magnetometer",
    "gravimeter", "clock", "timekeeping", "semiconductor", "foundry", "wafer", "packaging", "firmware",
)
_SYLLABLES = ("qu", "an", "tor", "ix", "ve", "lo", "ra", "zen", "ka", "mi", "on", "sys", "tek", "ar", "el", "pho", "ly", "nu")

#: Company names: made up, a few thousand of them, a few very often in the news and most rarely.
COMPANIES = tuple(
    dict.fromkeys(
        "".join(parts).capitalize()
        for parts in itertools.islice(itertools.product(_SYLLABLES, repeat=3), 0, None, 1)
        if len(set(parts)) == 3
    )
)[:4000]


def _zipf_table(values: tuple[str, ...], size: int = 1 << 16) -> list[str]:
    """About ``size`` entries in which ``values[k]`` fills a share proportional to 1/(k+1): a uniform index draws Zipf-like."""
    weights = [1.0 / (rank + 1) for rank in range(len(values))]
    total = sum(weights)
    table: list[str] = []
    for value, weight in zip(values, weights):
        table += [value] * max(1, round(size * weight / total))
    return table


def generate_items(count: int, now: datetime, seed: int = 15) -> Iterator[tuple[str, str, Item]]:
    """``count`` items as ``(source name, id, Item)``, published over :data:`SPAN` before ``now``, oldest first.

    Oldest first, as a database that ingested feeds for years holds them: its
    rows were appended in about the order they were published.

    Each item's choices are fields of one 128-bit random number: drawing them
    one ``random`` call at a time made generating a million items take a minute.
    """
    rng = random.Random(seed)
    companies, topics = _zipf_table(COMPANIES), _zipf_table(_TOPICS, 1 << 12)
    start = int((now - SPAN).timestamp())
    step = SPAN.total_seconds() / count
    sentence_sets = [" ".join(s) for k in (1, 2) for s in itertools.permutations(SENTENCES, k)]
    for number in range(count):
        bits = rng.getrandbits(128)
        source, host, tag = SOURCES[number % len(SOURCES)]
        company, other = companies[(bits & 0xFFFF) % len(companies)], companies[((bits >> 16) & 0xFFFF) % len(companies)]
        money = (bits >> 32) % 100 < 12
        verb = _MONEY[(bits >> 39) & 1] if money else _VERBS[(bits >> 40) % len(_VERBS)]
        title = f"{company} {verb} {_SUBJECTS[(bits >> 48) % len(_SUBJECTS)]} {DETAILS[(bits >> 56) % len(DETAILS)]}"
        words = " ".join(topics[((bits >> shift) & 0xFFF) % len(topics)] for shift in range(64, 64 + 12 * (2 + (bits >> 124) % 4), 12))
        summary = f"{sentence_sets[(bits >> 112) % len(sentence_sets)]} Also mentioned: {other}; {words}."
        moment = time.gmtime(start + int((number + rng.random()) * step))
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", moment)
        url = f"https://{host}/{stamp[:10].replace('-', '/')}/{company.lower()}-{number}"
        key, _ = entry_key({"id": url}, url, title, summary)  # an entry whose guid is its link, as most have
        yield source, item_id(url), Item(key, url, title, summary, "Investing" if money else tag, stamp, dated=True)


def build(path: Path, count: int, now: datetime | None = None, batch: int = 50_000) -> dict:
    """Write ``count`` generated items (and their publishers) into the database at ``path``.

    The catalog is not written here: run ``qsite ingest site`` on the same
    file for the endpoints that need it. Returns timings and the items per tag.
    """
    now = now or datetime.now(timezone.utc).replace(microsecond=0)
    seen_at = format_time(now)
    started = time.perf_counter()
    db = open_database(path)
    try:
        with transaction(db):
            for name, host, tag in SOURCES:
                sources_store.add_source(db, name, f"https://{host}/feed.xml", tag)
            items = generate_items(count, now)
            inserted = news_store.bulk_insert_items(db, items, seen_at, batch=batch)
            bump_version(db, NEWS, seen_at)
        by_tag = dict(db.execute("SELECT tag, count(*) FROM news GROUP BY tag").fetchall())
    finally:
        db.close()
    return {"items": inserted, "seconds": time.perf_counter() - started, "news_by_tag": by_tag, "built_at": seen_at}
