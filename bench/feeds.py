"""Realistic feeds for the benchmark, and a loopback server that serves them.

The feeds look like what real publishers send: RSS 2.0, Atom 1.0 and RSS 1.0
in rotation, HTML in summaries, ``content:encoded`` bodies, tracking
parameters on links, categories, and dates spread over the past two years.
Everything is seeded, so two runs parse exactly the same bytes.

The server is a separate process (``python -m bench.feeds serve DIR``) so that
serving the feeds costs the process being measured nothing. It keeps every
body in memory, answers with a strong ``ETag`` and ``Last-Modified``, honours
``If-None-Match`` / ``If-Modified-Since`` with 304, and counts what it sent
(``GET /_stats``), so the benchmark can show that the unchanged run really
asked and was really told "not modified".
"""

from __future__ import annotations

import argparse
import email.utils
import hashlib
import json
import random
import sys
import threading
from datetime import datetime, timedelta, timezone
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from xml.sax.saxutils import escape

TAGS = ("Science", "Industry", "Investing")
FORMATS = ("rss2", "atom", "rss1")

#: What the feeds (and bench/newsdb.py's million items) are about.
SUBJECTS = [
    "superconducting qubits", "trapped-ion processors", "neutral-atom arrays", "photonic chips",
    "topological qubits", "spin qubits in silicon", "quantum error correction", "logical qubits",
    "surface codes", "quantum annealers", "quantum networking", "post-quantum cryptography",
    "variational algorithms", "quantum chemistry simulations", "cryogenic control electronics",
    "quantum sensing", "quantum random number generators", "bosonic codes", "qubit coherence",
]
_VERBS = [
    "Researchers demonstrate", "Startup unveils", "Lab reports", "Team doubles", "New study maps",
    "Consortium standardises", "Chipmaker scales", "Physicists extend", "Engineers cut noise in",
    "Investors back", "Fund raises capital for", "Company files IPO on the strength of",
]
DETAILS = [
    "with a two-qubit gate fidelity above 99.9 percent",
    "using a modular architecture that links several cryostats",
    "in a peer-reviewed paper published this week",
    "after a funding round led by deep-tech investors",
    "as part of a national quantum programme",
    "while reducing the error rate by an order of magnitude",
    "on hardware that runs at higher temperatures than before",
    "in partnership with a major cloud provider",
]
SENTENCES = [
    "The result brings fault-tolerant machines a step closer, the authors say.",
    "Independent experts cautioned that the benchmark is narrow and hard to compare.",
    "The company plans to offer access through its cloud platform next year.",
    "Shares of listed quantum firms moved sharply on the news.",
    "The work relies on a new calibration routine that runs in minutes instead of hours.",
    "Error rates fell below the threshold at which surface codes start to pay off.",
    "The team published its control software under an open-source licence.",
    "Analysts expect the market for quantum services to keep growing through the decade.",
    "A second group reproduced the measurement on different hardware.",
    "The funding will pay for a larger fabrication line and new hires.",
]


def _rfc822(moment: datetime) -> str:
    return email.utils.format_datetime(moment, usegmt=True)


def _iso(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%dT%H:%M:%SZ")


def make_items(feed_no: int, count: int, now: datetime, rng: random.Random) -> list[dict]:
    """``count`` items for feed ``feed_no``, newest first, with unique canonical URLs."""
    items = []
    moment = now - timedelta(minutes=rng.randint(5, 600))
    for item_no in range(count):
        subject = rng.choice(SUBJECTS)
        title = f"{rng.choice(_VERBS)} {subject} {rng.choice(DETAILS)}"
        paragraphs = rng.sample(SENTENCES, rng.randint(2, 5))
        summary_html = (
            f"<p><strong>{escape(title)}</strong> &mdash; {escape(paragraphs[0])}</p>"
            f"<p>{' '.join(escape(s) for s in paragraphs[1:])} "
            f'<a href="https://example.org/related/{feed_no}/{item_no}">Read the <em>background</em></a>.</p>'
        )
        content_html = summary_html + "".join(f"<p>{escape(s)}</p>" for s in rng.sample(SENTENCES, 4))
        slug = hashlib.sha1(f"{feed_no}-{item_no}-{title}".encode()).hexdigest()[:12]
        link = (
            f"https://news{feed_no % 17}.example.com/{moment:%Y/%m}/{slug}"
            f"?utm_source=rss&utm_medium=feed&utm_campaign=q{feed_no}&ref=feed"
        )
        items.append(
            {
                "title": title,
                "link": link,
                "summary_html": summary_html,
                "content_html": content_html,
                "published": moment,
                "categories": [subject, rng.choice(["research", "business", "hardware", "funding"])],
            }
        )
        moment -= timedelta(minutes=rng.randint(30, 60 * 30))
    return items


def render(feed_no: int, fmt: str, items: list[dict], now: datetime) -> bytes:
    """One feed document in ``fmt`` (``rss2``, ``atom`` or ``rss1``) as UTF-8 bytes."""
    title = f"Quantum Wire {feed_no:03d}"
    home = f"https://news{feed_no % 17}.example.com/"
    out: list[str] = ['<?xml version="1.0" encoding="utf-8"?>\n']
    if fmt == "rss2":
        out.append(
            '<rss version="2.0" xmlns:content="http://purl.org/rss/1.0/modules/content/">\n<channel>\n'
            f"<title>{title}</title><link>{home}</link><description>Quantum computing news</description>\n"
            f"<lastBuildDate>{_rfc822(now)}</lastBuildDate>\n"
        )
        for item in items:
            cats = "".join(f"<category>{escape(c)}</category>" for c in item["categories"])
            out.append(
                f"<item><title>{escape(item['title'])}</title><link>{escape(item['link'])}</link>"
                f'<guid isPermaLink="true">{escape(item["link"])}</guid>'
                f"<pubDate>{_rfc822(item['published'])}</pubDate>{cats}"
                f"<description>{escape(item['summary_html'])}</description>"
                f"<content:encoded><![CDATA[{item['content_html']}]]></content:encoded></item>\n"
            )
        out.append("</channel>\n</rss>\n")
    elif fmt == "atom":
        out.append(
            '<feed xmlns="http://www.w3.org/2005/Atom">\n'
            f'<title>{title}</title><link href="{home}"/><id>{home}</id><updated>{_iso(now)}</updated>\n'
        )
        for item in items:
            cats = "".join(f'<category term="{escape(c)}"/>' for c in item["categories"])
            out.append(
                f"<entry><title>{escape(item['title'])}</title>"
                f'<link rel="alternate" href="{escape(item["link"])}"/><id>{escape(item["link"])}</id>'
                f"<published>{_iso(item['published'])}</published><updated>{_iso(item['published'])}</updated>"
                f"<author><name>Staff writer</name></author>{cats}"
                f'<summary type="html">{escape(item["summary_html"])}</summary>'
                f'<content type="html">{escape(item["content_html"])}</content></entry>\n'
            )
        out.append("</feed>\n")
    elif fmt == "rss1":
        out.append(
            '<rdf:RDF xmlns:rdf="http://www.w3.org/1999/02/22-rdf-syntax-ns#" xmlns="http://purl.org/rss/1.0/"'
            ' xmlns:dc="http://purl.org/dc/elements/1.1/">\n'
            f'<channel rdf:about="{home}"><title>{title}</title><link>{home}</link>'
            "<description>Quantum computing news</description><items><rdf:Seq>"
            + "".join(f'<rdf:li rdf:resource="{escape(i["link"])}"/>' for i in items)
            + "</rdf:Seq></items></channel>\n"
        )
        for item in items:
            out.append(
                f'<item rdf:about="{escape(item["link"])}"><title>{escape(item["title"])}</title>'
                f"<link>{escape(item['link'])}</link><dc:date>{_iso(item['published'])}</dc:date>"
                f"<dc:subject>{escape(item['categories'][0])}</dc:subject>"
                f"<description>{escape(item['summary_html'])}</description></item>\n"
            )
        out.append("</rdf:RDF>\n")
    else:
        raise ValueError(f"unknown feed format {fmt!r}")
    return "".join(out).encode("utf-8")


def write_feeds(
    folder: Path, feeds: int, items: int, seed: int = 7, first: int = 0, now: datetime | None = None
) -> list[dict]:
    """Write ``feeds`` feeds of ``items`` items into ``folder``; return one record per feed.

    Feeds are numbered from ``first`` (so two sets in one folder never share a
    URL) and listed in ``index.json``, which :class:`FeedServer` serves from.
    Each record has ``path`` (the server path), ``file``, ``format`` and
    ``tag`` (the tag a config would give that source, in rotation).
    """
    rng = random.Random(seed + first)
    now = now or datetime.now(timezone.utc).replace(microsecond=0)
    folder.mkdir(parents=True, exist_ok=True)
    index = folder / "index.json"
    records = json.loads(index.read_text(encoding="utf-8")) if index.exists() else []
    added = []
    for feed_no in range(first, first + feeds):
        fmt = FORMATS[feed_no % len(FORMATS)]
        body = render(feed_no, fmt, make_items(feed_no, items, now, rng), now)
        name = f"feed-{feed_no:03d}.xml"
        (folder / name).write_bytes(body)
        added.append({"path": f"/feeds/{name}", "file": str(folder / name), "format": fmt, "tag": TAGS[feed_no % 3]})
    index.write_text(json.dumps(records + added, indent=1), encoding="utf-8")
    return added


_CONTENT_TYPES = {
    "rss2": "application/rss+xml; charset=utf-8",
    "atom": "application/atom+xml; charset=utf-8",
    "rss1": "application/rdf+xml; charset=utf-8",
}


def content_type(fmt: str) -> str:
    return _CONTENT_TYPES[fmt]


class FeedServer(ThreadingHTTPServer):
    """Serves the feeds of some folders from memory with validators and 304s."""

    daemon_threads = True
    request_queue_size = 128

    def __init__(self, address, folders: list[Path]):
        self.docs = {}
        last_modified = _rfc822(datetime.now(timezone.utc).replace(microsecond=0))
        records = [r for folder in folders for r in json.loads((folder / "index.json").read_text(encoding="utf-8"))]
        for record in records:
            body = Path(record["file"]).read_bytes()
            etag = '"' + hashlib.sha256(body).hexdigest()[:32] + '"'
            self.docs[record["path"]] = (body, etag, last_modified, content_type(record["format"]))
        self.stats = {"200": 0, "304": 0, "404": 0, "bytes": 0}
        self.lock = threading.Lock()
        super().__init__(address, _Handler)

    def count(self, key: str, size: int = 0) -> None:
        with self.lock:
            self.stats[key] += 1
            self.stats["bytes"] += size


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def do_GET(self):
        server: FeedServer = self.server
        if self.path == "/_stats":
            return self._send(200, json.dumps(server.stats).encode(), {"Content-Type": "application/json"})
        if self.path == "/_reset":
            with server.lock:
                server.stats.update({"200": 0, "304": 0, "404": 0, "bytes": 0})
            return self._send(200, b"{}", {"Content-Type": "application/json"})
        doc = server.docs.get(self.path)
        if doc is None:
            server.count("404")
            return self._send(404, b"not found", {"Content-Type": "text/plain"})
        body, etag, last_modified, ctype = doc
        validators = {"ETag": etag, "Last-Modified": last_modified}
        if self.headers.get("If-None-Match") == etag or (
            "If-None-Match" not in self.headers and self.headers.get("If-Modified-Since") == last_modified
        ):
            server.count("304")
            return self._send(304, b"", validators)
        server.count("200", len(body))
        self._send(200, body, {"Content-Type": ctype, **validators})

    def _send(self, status: int, body: bytes, headers: dict) -> None:
        try:
            self.send_response(status)
            for name, value in headers.items():
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            if status != 304:
                self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            pass

    def log_message(self, *args):
        pass


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m bench.feeds", description=__doc__.split("\n\n")[0])
    commands = parser.add_subparsers(dest="command", required=True)
    make = commands.add_parser("make", help="write feeds into a folder, e.g. make /tmp/feeds --feeds 100 --items 50")
    make.add_argument("folder", type=Path)
    make.add_argument("--feeds", type=int, default=100)
    make.add_argument("--items", type=int, default=50)
    make.add_argument("--seed", type=int, default=7)
    make.add_argument("--first", type=int, default=0, help="number of the first feed (to add a second set)")
    serve = commands.add_parser("serve", help="serve folders written by make, e.g. serve /tmp/feeds --port 8765")
    serve.add_argument("folders", type=Path, nargs="+")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=0)
    args = parser.parse_args(argv)
    if args.command == "make":
        records = write_feeds(args.folder, args.feeds, args.items, args.seed, args.first)
        print(f"wrote {len(records)} feeds into {args.folder}")
        return
    server = FeedServer((args.host, args.port), args.folders)
    # The parent reads the port from the first line, so it can ask for port 0.
    print(f"listening {server.server_address[1]}", flush=True)
    try:
        server.serve_forever()
    except KeyboardInterrupt:
        pass
    finally:
        server.server_close()


if __name__ == "__main__":
    sys.exit(main())
