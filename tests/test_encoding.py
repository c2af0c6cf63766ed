"""Feeds are read in the encoding the document declares, whatever feedparser or the HTTP header made of it."""

from qsite.pipeline.news.encoding import check_encoding, declared_encoding
from qsite.pipeline.news.feeds import FeedJob, read_feed
from tests.support.goldens import REAL, SYNTHETIC


def read(name: str, headers: dict | None = None, folder=REAL):
    body = (folder / name).read_bytes()
    return read_feed(FeedJob(name, "Science", (), body, headers or {}, f"http://127.0.0.1:9/{name}", "2030-01-01T00:00:00Z"))


def test_declared_encoding_from_the_bom_the_declaration_or_the_xml_default():
    assert declared_encoding(b'<?xml version="1.0" encoding="euc-kr"?><rss/>') == ("euc-kr", "XML declaration")
    assert declared_encoding("<rss/>".encode("utf-16"))[1] == "byte-order mark"
    assert declared_encoding(b"<rss/>") == ("utf-8", "default")


def test_a_narrower_declared_charset_is_read_as_its_superset_with_a_warning():
    result = read("ricanet.rss")  # declares euc-kr, writes CP949: feedparser fell back to windows-1252
    assert "구라치다 걸리면" in [item.title for item in result.items]
    assert "declares euc-kr" in result.warning
    result = read("y-moto-bd1.atom")  # declares Shift_JIS, writes CP932
    assert "さらなる防寒対策" in [item.title for item in result.items]


def test_a_wrong_http_charset_does_not_win_over_the_document():
    result = read("oren-ru.rss", {"Content-Type": "text/html; charset=ISO-8859-1"})
    assert all("Ã" not in item.title and "Â" not in item.title for item in result.items)
    assert any("Оренбург" in item.title or "оренбург" in item.summary.lower() for item in result.items)
    assert "declares windows-1251 but was read as ISO-8859-1" in result.warning
    assert read("oren-ru.rss", {"Content-Type": "application/rss+xml"}).warning is None


def test_latin1_bytes_without_a_declaration_stay_windows_1252_with_a_warning():
    result = read("uol-noticias.rss")
    assert any("simulações" in item.title for item in result.items)
    assert "not utf-8" in result.warning


def test_utf8_bytes_sent_as_utf8_stay_utf8_whatever_the_stale_declaration():
    body = '<?xml version="1.0" encoding="ISO-8859-1"?><rss version="2.0"><channel><title>t</title><item><title>Café ✓</title><link>https://x.example/1</link></item></channel></rss>'.encode()
    check = check_encoding(body, "utf-8")
    assert check.text is None and "is UTF-8" in check.warning


def test_utf16_with_a_bom():
    result = read("utf16.rss", folder=SYNTHETIC)
    assert result.items[0].title == "Ünïcödé in UTF-16: 日本語, Ελληνικά, русский" and result.warning is None
