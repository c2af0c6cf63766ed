"""``make bench``'s verdicts and printed table: ratios within rounds, the issues' targets, one line per target."""

from __future__ import annotations

import statistics

from bench.uncached import EXCLUDING_KINDS

#: The targets of the issues; each row is (name, value key, comparison, bound).
TARGETS = [
    # issue 48: the cached path stays at 0.7x of granian raw
    ("news, courses, stats, 304 vs granian raw ASGI", "min_vs_raw", ">=", 0.7),
    ("news, courses, stats vs uvicorn-h11 raw ASGI", "min_vs_h11", ">=", 2.5),
    ("news, courses, stats vs Datasette JSON", "min_vs_datasette", ">=", 3.0),
    ("cached news, limiter on vs off", "limiter_on_vs_off", ">=", 0.9),
    ("p99 at 32 connections (ms)", "max_p99_ms", "<=", 25.0),
    ("cached news, 2 workers vs 1 (wrk shares the cores)", "workers_2_vs_1", ">=", 1.6),
    ("full ingest vs feedparser alone", "full_vs_feedparser", "<=", 1.0),
    ("unchanged ingest vs feedparser alone", "unchanged_vs_feedparser", "<=", 0.1),
    ("serving process peak RSS (MB)", "peak_rss_mb", "<", 150.0),
    ("new ingest visible through the API (s)", "visible_s", "<=", 2.0),
    ("uncached distinct pages, 1M items: p99 (ms)", "uncached_p99_ms", "<=", 25.0),
    # issue 27: twice the req/s measured before it, as a share of granian's raw ceiling in the same run
    ("uncached distinct pages, 1M items: vs granian raw", "uncached_vs_raw", ">=", 0.09),
    ("uncached news searches, 1M items: vs granian raw", "uncached_search_vs_raw", ">=", 0.04),
    ("open loop, pages at half the best rate: p99.9 (ms)", "open_pages_half_p999_ms", "<=", 25.0),
    ("open loop, searches at half the best rate: p99.9 (ms)", "open_search_half_p999_ms", "<=", 25.0),
    ("uncached distinct pages, 1M items: vs Datasette JSON", "uncached_vs_datasette", ">=", 10.0),
    ("uncached news searches alone, 1M items: p99 (ms)", "uncached_search_p99_ms", "<=", 25.0),
    ("uncached news searches alone, 1M items: vs Datasette JSON", "uncached_search_vs_datasette", ">=", 10.0),
    ("uncached single items (news/{id}), 1M items: p99 (ms)", "uncached_item_p99_ms", "<=", 25.0),
    ("uncached sync pages (updated_since), 1M items: p99 (ms)", "uncached_sync_p99_ms", "<=", 25.0),
    ("serving process peak RSS less the database's map, 1M items (MB)", "uncached_peak_rss_mb", "<", 150.0),
    # what a stall costs ends with it: the rate after stalls against the rate before (bench/stalls.py)
    ("uncached pages, 1M items: after stalls vs before", "uncached_after_stalls", ">=", 0.9),
    # issue 27's timing guard: a request's SQL alone (page and count), bench/sql_timing.py
    ("SQL of an uncached page, 1M items: p99 (ms)", "sql_pages_p99_ms", "<=", 0.5),
    ("SQL of an uncached search, 1M items: p99 (ms)", "sql_searches_p99_ms", "<=", 5.0),
    # "any q": each kind of bench.uncached.SEARCH_KINDS apart, the worst kind's p99
    ("SQL of a search of any kind, 1M items: worst kind's p99 (ms)", "sql_search_kinds_worst_p99_ms", "<=", 5.0),
    # bench.uncached.EXCLUDING_KINDS, apart: within a request's p99
    ("SQL of a search excluding a very common word, 1M items: p99 (ms)", "sql_search_excluding_p99_ms", "<=", 25.0),
    # /metrics on vs off, side by side in each round (bench/metrics_cost.py): at most 3% of either path
    ("cached news, metrics on vs off", "metrics_cached_on_vs_off", ">=", 0.97),
    ("uncached pages, 1M items: metrics on vs off", "metrics_uncached_on_vs_off", ">=", 0.97),
    # every kind of search users send (bench.user_searches), filtered or not
    ("SQL of a search users send, 1M items: worst kind's p99 (ms)", "sql_user_kinds_worst_p99_ms", "<=", 2.0),
    ("SQL of the searches users send, 1M items: mix's p99 (ms)", "sql_user_mix_p99_ms", "<=", 2.0),
]

#: The servers the raw ASGI ceiling runs under (bench/servers.py), the first being ``qsite serve``'s as
#: the issues measured it; the last is granian with its runtime's threads in SCHED_BATCH, as ``qsite
#: serve`` has run them since (service/serve/worker.py batch_other_threads): reported, the targets keep the first.
RAW_SERVERS = ("granian", "uvicorn-h11", "uvicorn-httptools", "granian-batched")

#: The rows the targets are judged on (the others are references and diagnostics).
OURS = ("news", "news item", "courses", "stats", "news 304")

#: Each of our rows and the raw row with the same bytes (under every server).
SAME_BYTES = {
    "news": "raw news",
    "news item": "raw news item",
    "courses": "raw courses",
    "stats": "raw stats",
    "news 304": "raw news 304",
    "news, no limiter": "raw news",
}


def ratio(api: dict, a: str, b: str) -> float:
    """Median over rounds of req/s of ``a`` over ``b`` within the same round.

    Targets run back to back within a round, so a ratio within a round is
    taken under the same conditions; the machine is shared, and load from
    elsewhere shifts whole rounds more than it shifts one target against another.
    """
    return statistics.median(x["rps"] / y["rps"] for x, y in zip(api[a]["rounds"], api[b]["rounds"]))


def ratios(api: dict) -> dict:
    """For each of our rows: vs the same bytes raw under each server, and vs Datasette's JSON."""
    out = {}
    for name, raw in SAME_BYTES.items():
        if name not in api:
            continue
        row = {}
        for server in RAW_SERVERS:
            if f"{server} {raw}" in api:
                row[f"vs_{server}"] = ratio(api, name, f"{server} {raw}")
        if "datasette news" in api and name != "news 304":
            row["vs_datasette"] = ratio(api, name, "datasette news")
        out[name] = row
    if "news" in api and "news, no limiter" in api:
        out["limiter_on_vs_off"] = ratio(api, "news", "news, no limiter")
    if "news, 2 workers" in api and "news, 1 worker, any core" in api:
        out["workers_2_vs_1"] = ratio(api, "news, 2 workers", "news, 1 worker, any core")
        if "cpu" in api["news, 2 workers"]:
            out["workers_2_cpu_ceiling"] = cpu_ceiling(api["news, 2 workers"]["rounds"], api["news, 1 worker, any core"]["rounds"])
    for server in RAW_SERVERS[1:]:
        if f"{server} raw news" in api and "granian raw news" in api:
            out[f"{server}_vs_granian"] = ratio(api, f"{server} raw news", "granian raw news")
    return out


def cpu_ceiling(two: list[dict], one: list[dict]) -> float:
    """The most 2 workers could reach over 1 on this machine's cores, median over rounds.

    Every core busy with the server and wrk alone, at the CPU a request cost
    them in the 2-worker run (server plus wrk microseconds), over the 1-worker
    req/s of the same round. A ratio near this ceiling says the second worker
    is short of cores, not waiting on the first.
    """
    ceilings = []
    for a, b in zip(two, one):
        cost = a["cpu"]["server_us_per_request"] + a["cpu"]["wrk_us_per_request"]
        ceilings.append(a["cpu"]["cores"] * 1e6 / cost / b["rps"])
    return statistics.median(ceilings)


def cpu_line(name: str, row: dict) -> str:
    cpu = row["cpu"]
    return (
        f"  {name}: server {cpu['server_cores']:.2f} cores ({cpu['server_us_per_request']:.0f} us a request), "
        f"wrk {cpu['wrk_cores']:.2f} ({cpu['wrk_us_per_request']:.0f} us), other work {cpu['other_cores']:.2f}, "
        f"idle {cpu['idle_cores']:.2f} of {cpu['cores']}"
    )


def verdicts(results: dict) -> list[dict]:
    api, rat = results.get("api", {}), results.get("ratios", {})
    values = {}
    ours = {name: r for name, r in rat.items() if name in OURS}
    for key, column in (("min_vs_raw", "vs_granian"), ("min_vs_h11", "vs_uvicorn-h11"), ("min_vs_datasette", "vs_datasette")):
        found = [r[column] for r in ours.values() if column in r]
        if found:
            values[key] = min(found)
    for key in ("limiter_on_vs_off", "workers_2_vs_1"):
        if key in rat:
            values[key] = rat[key]
    measured = [v for name, v in api.items() if name in OURS]
    if measured:
        values["max_p99_ms"] = max(v["p99_ms"] for v in measured)
    if "ingestion" in results:
        values["full_vs_feedparser"] = results["ingestion"]["full_vs_feedparser"]
        values["unchanged_vs_feedparser"] = results["ingestion"]["unchanged_vs_feedparser"]
    if "memory" in results:
        values["peak_rss_mb"] = results["memory"]["serve_peak_mb"]
    if "visibility" in results:
        values["visible_s"] = results["visibility"]["max_visible_after_commit_s"]
    if "uncached" in results:
        uncached = results["uncached"]
        values["uncached_p99_ms"] = uncached["targets"]["uncached"]["p99_ms"]
        if uncached["vs_datasette"]["uncached"] is not None:
            values["uncached_vs_datasette"] = uncached["vs_datasette"]["uncached"]
        values["uncached_search_p99_ms"] = uncached["targets"]["uncached search"]["p99_ms"]
        if uncached["vs_datasette"]["uncached search"] is not None:
            values["uncached_search_vs_datasette"] = uncached["vs_datasette"]["uncached search"]
        # the process's own: its map of the database (api.mmap_size) is the page cache (bench.harness.PeakMemory)
        values["uncached_peak_rss_mb"] = uncached["memory"].get("peak_less_db_mb", uncached["memory"]["peak_mb"])
        for mix in ("item", "sync"):
            if f"uncached {mix}" in uncached["targets"]:
                values[f"uncached_{mix}_p99_ms"] = uncached["targets"][f"uncached {mix}"]["p99_ms"]
        # the ceiling run in each uncached round, on the same cores: the median of the rounds' ratios
        for key, name in (("uncached_vs_raw", "uncached"), ("uncached_search_vs_raw", "uncached search")):
            if uncached["vs_raw"][name] is not None:
                values[key] = uncached["vs_raw"][name]
        for kind, timing in (uncached.get("sql_ms") or {}).items():
            values[f"sql_{kind}_p99_ms"] = timing["p99_ms"]
        if uncached.get("sql_search_kinds_ms"):
            kinds = uncached["sql_search_kinds_ms"]
            values["sql_search_kinds_worst_p99_ms"] = max(t["p99_ms"] for k, t in kinds.items() if k not in EXCLUDING_KINDS)
            if excluding := [t["p99_ms"] for k, t in kinds.items() if k in EXCLUDING_KINDS]:
                values["sql_search_excluding_p99_ms"] = max(excluding)
        if uncached.get("sql_user_search_kinds_ms"):
            users = uncached["sql_user_search_kinds_ms"]
            values["sql_user_kinds_worst_p99_ms"] = max(t["p99_ms"] for t in users.values())
            values["sql_user_mix_p99_ms"] = user_mix(users, uncached["user_search_shares"])["p99_ms"]
        if uncached.get("stalls"):
            values["uncached_after_stalls"] = uncached["stalls"]["after_vs_before"]
        for name, key in (("uncached", "open_pages_half_p999_ms"), ("uncached search", "open_search_half_p999_ms")):
            half = ((uncached.get("open_loop") or {}).get(name) or {}).get("at_half_rate")
            if half:
                values[key] = half["p999_ms"]
    for path in ("cached", "uncached"):
        if path in (results.get("metrics_cost") or {}):
            values[f"metrics_{path}_on_vs_off"] = results["metrics_cost"][path]["ratio"]
    rows = []
    for label, key, op, bound in TARGETS:
        if key in values:
            value = values[key]
            ok = {"<=": value <= bound, ">=": value >= bound, "<": value < bound}[op]
            rows.append({"target": label, "value": round(value, 3), "bound": f"{op} {bound:g}", "pass": ok})
    return rows


def user_mix(timings: dict, shares: dict) -> dict:
    """p50, p99 and p99.9 of the searches users send, mixed by ``shares`` from each kind's timings (ms).

    Each kind's timed requests stand for its share: a kind's ``times`` (every request's ms,
    sorted) weighted by its share over their number, and the percentiles read off the weighted whole.
    """
    weighted = sorted((ms, shares[kind] / len(t["times_ms"])) for kind, t in timings.items() for ms in t["times_ms"])
    total = sum(w for _, w in weighted)
    found, seen = {}, 0.0
    marks = iter((("p50_ms", 0.5), ("p99_ms", 0.99), ("p999_ms", 0.999)))
    name, mark = next(marks)
    for ms, w in weighted:
        seen += w
        while seen >= mark * total:
            found[name] = round(ms, 3)
            try:
                name, mark = next(marks)
            except StopIteration:
                return found
    return found


def table(results: dict) -> str:
    lines = []
    api = results.get("api", {})
    if api:
        rat = results.get("ratios", {})
        lines.append(
            f"{'target':<30} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>7} {'errors':>6} {'bytes':>6}"
            f"  {'vs granian':>10} {'vs h11':>7} {'vs ds':>6}"
        )
        for name, row in api.items():
            r = rat.get(name, {})
            cells = [
                f"{r['vs_granian']:.2f}x" if "vs_granian" in r else "",
                f"{r['vs_uvicorn-h11']:.2f}x" if "vs_uvicorn-h11" in r else "",
                f"{r['vs_datasette']:.1f}x" if "vs_datasette" in r else "",
            ]
            lines.append(
                f"{name:<30} {row['rps']:>8.0f} {row['p50_ms']:>7.2f} {row['p99_ms']:>7.2f} {row['errors']:>6} "
                f"{row['body_bytes']:>6}  {cells[0]:>10} {cells[1]:>7} {cells[2]:>6}"
            )
        for server in RAW_SERVERS[1:]:
            if f"{server}_vs_granian" in rat:
                lines.append(f"raw ASGI ceiling, {server} vs granian (news): {rat[f'{server}_vs_granian']:.2f}x")
        against_batched = [f"{name} {r['vs_granian-batched']:.2f}x" for name, r in rat.items() if name in OURS and "vs_granian-batched" in r]
        if against_batched:
            lines.append("ours vs granian-batched raw (threads batched as qsite serve's): " + ", ".join(against_batched))
        if "limiter_on_vs_off" in rat:
            lines.append(f"cached news, fair-use limiter on vs off: {rat['limiter_on_vs_off']:.2f}x")
        if "workers_2_vs_1" in rat:
            wrk = api["news, 2 workers"].get("wrk", {})
            lines.append(
                f"cached news, 2 workers vs 1 (limiter off, neither pinned; wrk, {wrk.get('threads', '?')} threads, "
                f"{'not pinned' if wrk.get('core') is None else 'on core ' + str(wrk['core'])}, shares the cores): "
                f"{rat['workers_2_vs_1']:.2f}x"
            )
            for name in ("news, 1 worker, any core", "news, 2 workers"):
                if "cpu" in api[name]:
                    lines.append(cpu_line(name, api[name]))
            if "workers_2_cpu_ceiling" in rat:
                lines.append(
                    f"  most the cores allow (all of them on the 2-worker server and wrk, at its CPU a request): "
                    f"{rat['workers_2_cpu_ceiling']:.2f}x"
                )
        lines.append("")
    ing = results.get("ingestion")
    if ing:
        fp = ing["feedparser"]
        lines.append(f"ingestion of {ing['feeds']} feeds x {ing['items_per_feed']} items ({fp['bytes'] / 1e6:.1f} MB) over loopback "
                     "(medians; the ingest ratios are the median of each repeat's against the feedparser run just before it):")
        lines.append(f"  feedparser.parse alone, one process  {fp['seconds']:7.2f} s   1.00x")
        lines.append(f"  fetch alone (pipeline fetcher)       {ing['fetch_only']['seconds']:7.2f} s   {ing['fetch_only']['seconds'] / fp['seconds']:.2f}x")
        lines.append(f"  ingest_news, full (new database)     {ing['full_seconds']:7.2f} s   {ing['full_vs_feedparser']:.2f}x")
        lines.append(f"  ingest_news, unchanged second run    {ing['unchanged_seconds']:7.3f} s   {ing['unchanged_vs_feedparser']:.3f}x")
        lines.append("")
    if "news_db" in results:
        db = results["news_db"]
        lines.append(
            f"database: {sum(db['news_by_tag'].values())} news items {db['news_by_tag']}, built by qsite ingest "
            f"site ({db['ingest_site_s']:.1f} s) and qsite ingest news ({db['ingest_news_s']:.1f} s)"
        )
    if "memory" in results:
        lines.append(f"serving process peak RSS (VmHWM): {results['memory']['serve_peak_mb']:.1f} MB")
    if "visibility" in results:
        trials = ", ".join(f"{t['visible_after_commit_s'] * 1000:.0f} ms" for t in results["visibility"]["trials"])
        lines.append(f"new item visible through the API after its ingest committed: {trials}")
    if "uncached" in results:
        lines += ["", *uncached_table(results["uncached"])]
        batched = api.get("granian-batched raw news")
        if batched:
            targets = results["uncached"]["targets"]
            lines.append(
                "the same as shares of granian raw with its threads batched as qsite serve's "
                f"({batched['rps']:.0f} req/s): pages {targets['uncached']['rps'] / batched['rps']:.3f}x, "
                f"searches {targets['uncached search']['rps'] / batched['rps']:.3f}x"
            )
    lines.append("")
    profiles = dict(results.get("profile_serve", {}))
    if "profile_ingest" in results:
        profiles["ingest"] = results["profile_ingest"]
    for name, prof in profiles.items():
        lines.append(f"profile {name} ({prof['samples']} samples, {prof['raw']}):")
        lines.append("  by layer:       " + "; ".join(f"{f} {p}%" for f, p in prof["layers_pct"]))
        lines.append("  self time:      " + "; ".join(f"{f} {p}%" for f, p in prof["self_pct"][:10]))
        lines.append("  project code:   " + "; ".join(f"{f} {p}%" for f, p in prof["project_inclusive_pct"][:10]))
        lines.append("")
    rows = results.get("targets", [])
    if rows:
        lines.append(f"{'target':<52} {'value':>9} {'bound':>8}  result")
        for row in rows:
            lines.append(f"{row['target']:<52} {row['value']:>9.3f} {row['bound']:>8}  {'PASS' if row['pass'] else 'FAIL'}")
    return "\n".join(lines)




def held_line(held: dict | None) -> list[str]:
    """What of the million-item database was held in the page cache, and what was read from the disk all the same."""
    if held is None:  # results from before 2026-11-27's vmtouch
        return []
    if not held["held_mb"]:
        return [f"database NOT held in the page cache ({held['why']}): its SQL timing may time the disk"]
    return [(f"database held in the page cache (vmtouch -l, {held['held_mb']:.0f} MB); the server read "
             f"{held['server_disk_read_mb']:.1f} MB from the disk all the same")]


def disk_reads(timing: dict) -> str:
    """How many of a timing's requests read the disk (their statements, not the page cache), when any did."""
    read = timing.get("read_from_disk") or {}
    return f"; {read['requests']} read {read['kb']:,} kB from the disk" if read.get("requests") else ""


def uncached_table(uncached: dict) -> list[str]:
    db = uncached["database"]
    requests = uncached["requests"]
    lines = [
        f"uncached: {db['items']:,} news items {db['news_by_tag']} ({db['db_mb']:.0f} MB), built in {db['seconds']:.0f} s; "
        f"{requests['pages']:,} distinct page requests ({uncached['share_news_search']:.0%} news searches, {uncached['share_glossary']:.0%} glossary searches), "
        f"{requests['search']:,} news searches",
        *held_line(uncached.get("held_in_page_cache")),
        f"{'target':<30} {'req/s':>8} {'p50 ms':>7} {'p99 ms':>8} {'> 25 ms':>8} {'errors':>6} {'walked':>7}",
    ]
    for name, row in uncached["targets"].items():
        over = row.get("over_25ms_pct")  # a share of the requests; not in results written before it was measured
        lines.append(
            f"{name:<30} {row['rps']:>8.1f} {row['p50_ms']:>7.2f} {row['p99_ms']:>8.2f} "
            f"{'n/a' if over is None else f'{over:.2f}%':>8} {row['errors']:>6} {row['requests_walked']:>7}"
        )
    memory = uncached["memory"]
    for name, ratio in uncached["vs_datasette"].items():
        shown = f"{ratio:.1f}x" if ratio is not None else "n/a (Datasette answered nothing in any round)"
        lines.append(f"{name} vs Datasette's table JSON (median of ratios within rounds): {shown}")
    for name, ratio in uncached["vs_raw"].items():
        shown = f"{ratio:.3f}x" if ratio is not None else "n/a (granian raw answered nothing in any round)"
        lines.append(f"{name} vs granian raw, run in the same rounds (median of ratios within rounds): {shown}")
    for name, found in (uncached.get("open_loop") or {}).items():
        half = found["at_half_rate"] or {}
        lines.append(
            f"open loop (k6, constant arrival rate), {name}: highest rate with p99 <= {found['p99_bound_ms']:g} ms "
            f"{found['best_rate']}/s (first over: {found['first_failed_rate']}/s); at {half.get('rate', 0)}/s "
            f"p50 {half.get('p50_ms', 0):.1f} ms, p99 {half.get('p99_ms', 0):.1f} ms, p99.9 {half.get('p999_ms', 0):.1f} ms"
        )
    stalls = uncached.get("stalls")
    if stalls:
        rps, p99 = stalls["rps"], stalls["p99_ms"]
        lines.append(
            f"uncached pages with the server stopped {stalls['stops']} times for {stalls['stop_s'] * 1000:.0f} ms: "
            f"before {rps['before']:.0f}/s (p99 {p99['before']:.1f} ms), during {rps['during']:.0f}/s "
            f"(p99 {p99['during']:.1f} ms), after {rps['after']:.0f}/s (p99 {p99['after']:.1f} ms): "
            f"{stalls['after_vs_before']:.2f}x"
        )
    for kind, timing in (uncached.get("sql_ms") or {}).items():
        both = timing.get("page_and_count")
        lines.append(
            f"SQL alone, {kind} ({timing['requests']:,}, as served): p50 {timing['p50_ms']:.2f} ms, "
            f"p99 {timing['p99_ms']:.2f} ms, max {timing['max_ms']:.2f} ms; slowest: {timing['slowest'][0][1]}"
            + (f"; page and count both: p50 {both['p50_ms']:.2f} ms, p99 {both['p99_ms']:.2f} ms" if both else "")
            + disk_reads(timing)
        )
    for kind, timing in (uncached.get("sql_search_kinds_ms") or {}).items():
        both = timing["page_and_count"]
        lines.append(
            f"SQL alone, searches of {kind} ({timing['requests']:,}, as served): p50 {timing['p50_ms']:.2f} ms, "
            f"p99 {timing['p99_ms']:.2f} ms, max {timing['max_ms']:.2f} ms; page and count both: p99 {both['p99_ms']:.2f} ms; "
            f"slowest: {timing['slowest'][0][1]}" + disk_reads(timing)
        )
    for name, stages in (uncached.get("stages_us") or {}).items():
        lines.append(f"{name}, Python by stage (median / mean us): "
                     + ", ".join(f"{stage} {t['p50_us']:.0f} / {t['mean_us']:.0f}" for stage, t in stages.items()))
    users = uncached.get("sql_user_search_kinds_ms") or {}
    if users:
        shares = uncached["user_search_shares"]
        mixed = user_mix(users, shares)
        lines.append(f"SQL alone, the searches users send, mixed by their shares: p50 {mixed['p50_ms']:.2f} ms, "
                     f"p99 {mixed['p99_ms']:.2f} ms, p99.9 {mixed['p999_ms']:.2f} ms")
        worst = max(users, key=lambda kind: users[kind]["p99_ms"])
        for kind, timing in users.items():
            lines.append(
                f"SQL alone, users' {kind} ({shares[kind]:.1%}, {timing['requests']:,}): p50 {timing['p50_ms']:.2f} ms, "
                f"p99 {timing['p99_ms']:.2f} ms, p99.9 {timing['p999_ms']:.2f} ms; slowest: {timing['slowest'][0][1]}"
                + (" (the worst kind)" if kind == worst else "") + disk_reads(timing)
            )
    lines.append(f"serving process at {db['items']:,} items: peak RSS (VmHWM) {memory['peak_mb']:.1f} MB, RSS {memory['rss_mb']:.1f} MB"
                 + (f", of which the database's map {memory['db_mapped_mb']:.1f} MB; peak less the map "
                    f"{memory['peak_less_db_mb']:.1f} MB" if "peak_less_db_mb" in memory else "")
                 + (f"; after the open loop's overload steps {memory['after_open_loop_peak_mb']:.1f} MB"
                    if "after_open_loop_peak_mb" in memory else ""))
    return lines
