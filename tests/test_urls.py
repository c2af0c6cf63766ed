"""Configured locations shown publicly carry no credentials and no local paths (db/urls.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from qsite.db.urls import REDACTED, is_credential_parameter, public_location


@pytest.mark.parametrize(
    ("location", "shown"),
    [
        ("https://feeds.example/rss.xml", "https://feeds.example/rss.xml"),
        ("https://user:pa%40ss@feeds.example:8443/rss?x=1", "https://feeds.example:8443/rss?x=1"),
        ("https://feeds.example/rss?apikey=abc&page=2", f"https://feeds.example/rss?apikey={REDACTED}&page=2"),
        ("https://feeds.example/rss?api_key=abc&Token=t&SECRET=s", f"https://feeds.example/rss?api_key={REDACTED}&Token={REDACTED}&SECRET={REDACTED}"),
        ("https://x.example/a?password=p&passwd=p&pwd=p", f"https://x.example/a?password={REDACTED}&passwd={REDACTED}&pwd={REDACTED}"),
        ("https://x.example/a?X-Amz-Signature=abc&sig=1&auth=2", f"https://x.example/a?X-Amz-Signature={REDACTED}&sig={REDACTED}&auth={REDACTED}"),
        ("https://x.example/a?q=quantum%20news&lang=en#top", "https://x.example/a?q=quantum%20news&lang=en#top"),
        ("https://[::1]:8080/feed?token", "https://[::1]:8080/feed?token"),
        ("HTTPS://Feeds.Example/Feed", "https://feeds.example/Feed"),
        ("/srv/qsite/feeds/lab-notes.xml", "lab-notes.xml"),
        ("../pipeline/samples/feeds/capital-brief.rdf", "capital-brief.rdf"),
        ("file:///srv/secret%20dir/feed.xml", "feed.xml"),
        # common secret names beyond the first list, and a fragment's pairs (OAuth's implicit flow)
        (
            "https://alice:hunter2@host/feed.xml?apikey=K&pass=P&jwt=J#access_token=T",
            f"https://host/feed.xml?apikey={REDACTED}&pass={REDACTED}&jwt={REDACTED}#access_token={REDACTED}",
        ),
        (
            "https://x.example/a?sid=1&JSESSIONID=2&csrf_token=3&passphrase=4&bearer=5&author=me",
            f"https://x.example/a?sid={REDACTED}&JSESSIONID={REDACTED}&csrf_token={REDACTED}&passphrase={REDACTED}&bearer={REDACTED}&author=me",
        ),
        ("https://x.example/a?page=1;token=t", f"https://x.example/a?page=1;token={REDACTED}"),
        ("https://x.example/app#/feed?token=t&page=2", f"https://x.example/app#/feed?token={REDACTED}&page=2"),
        ("https://x.example/a#!id_token=t;state=s", f"https://x.example/a#!id_token={REDACTED};state=s"),
        ("https://x.example/a?q=passage&bypass=1#section=2", "https://x.example/a?q=passage&bypass=1#section=2"),
    ],
)
def test_public_location(location, shown):
    assert public_location(location) == shown


@given(
    user=st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=1, max_size=12),
    secret=st.text(st.characters(codec="ascii", categories=("L", "N")), min_size=4, max_size=20),
    name=st.sampled_from(["key", "token", "access_token", "client_secret", "password", "signature", "auth", "pass", "jwt"]),
)
def test_no_credential_survives(user, secret, name):
    shown = public_location(f"https://{user}:{secret}@feeds.example/rss?{name}={secret}&page=1#{name}={secret}")
    assert shown == f"https://feeds.example/rss?{name}={REDACTED}&page=1#{name}={REDACTED}"


@pytest.mark.parametrize(
    "name, secret",
    [
        ("api_key", True), ("apiKey", True), ("apikey", True), ("access_token", True), ("accessToken", True),
        ("client_secret", True), ("X-Amz-Signature", True), ("sig", True), ("auth", True), ("session_id", True),
        ("PASSWORD", True), ("pass", True), ("jwt", True), ("id_token", True), ("PHPSESSID", True), ("xsrf", True),
        ("passage", False), ("bypass", False), ("author", False), ("keyword", False), ("monkey", False), ("id", False), ("p", False),
    ],
)
def test_only_whole_credential_words_are_secrets(name, secret):
    assert is_credential_parameter(name) is secret
    shown = public_location(f"https://example.org/feed?{name}=v1&page=2")
    assert shown == (f"https://example.org/feed?{name}=REDACTED&page=2" if secret else f"https://example.org/feed?{name}=v1&page=2")


def test_other_schemes_lose_credential_parameters_too():
    """db/redact.py shares the rule: a redis:// storage in a config error keeps no password in its query."""
    from qsite.db.redact import redact_url

    assert redact_url("redis://u:p@cache.example:6379/0?password=x&db=1#pass=y") == (
        f"redis://cache.example:6379/0?password={REDACTED}&db=1#pass={REDACTED}"
    )
