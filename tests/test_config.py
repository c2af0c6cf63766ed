"""The YAML config: what it accepts, how paths resolve, and the one clear message for what it refuses."""

from __future__ import annotations

import textwrap
from pathlib import Path

import pytest

from qsite.config import DEFAULT_CONFIG, ConfigError, load_config, parse_duration, parse_rate_limit, serving_workers
from tests.support.paths import ROOT, SITE_EXPORT

MINIMAL = "site_export:\n  source: export.json\n"


def write(tmp_path: Path, text: str, name: str = "qsite.yml") -> Path:
    path = tmp_path / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(textwrap.dedent(text), encoding="utf-8")
    return path


def error_of(path) -> str:
    with pytest.raises(ConfigError) as caught:
        load_config(path)
    return str(caught.value)


def test_the_bundled_default_points_at_the_samples():
    config = load_config()
    assert config.path == DEFAULT_CONFIG
    assert config.database_path == ROOT / "db" / "site.db"
    assert config.site_export_source == str(SITE_EXPORT)
    assert (config.site_export.every, config.news.every, config.api.cache_max_age) == (3600, 900, 300)


def test_defaults_fill_what_a_minimal_config_leaves_out(tmp_path):
    config = load_config(write(tmp_path, MINIMAL))
    assert config.database_path == tmp_path / "site.db"
    assert config.news.sources == [] and config.news.retention_days is None
    assert config.api.cache_max_age == 300


def test_relative_paths_resolve_against_the_config_folder(tmp_path, monkeypatch):
    path = write(
        tmp_path,
        """\
        database: data/site.db
        site_export:
          source: ../exports/site.json
        news:
          sources:
            - {name: Local, url: feeds/local.xml, tag: Science}
            - {name: Remote, url: "https://example.org/feed.xml", tag: Industry}
        """,
        "conf/qsite.yml",
    )
    monkeypatch.chdir(tmp_path.parent)  # the working folder must not matter
    config = load_config(path)
    assert config.database_path == tmp_path / "conf" / "data" / "site.db"
    assert config.site_export_source == str(tmp_path / "exports" / "site.json")
    local, remote = config.news.sources
    assert config.source_location(local) == str(tmp_path / "conf" / "feeds" / "local.xml")
    assert config.source_location(remote) == "https://example.org/feed.xml"
    url_config = load_config(write(tmp_path, "site_export:\n  source: http://127.0.0.1:9/export.json\n"))
    assert url_config.site_export_source == "http://127.0.0.1:9/export.json"


def test_database_override_resolves_against_the_working_folder(tmp_path, monkeypatch):
    path = write(tmp_path, "database: elsewhere.db\n" + MINIMAL, "conf/qsite.yml")
    monkeypatch.chdir(tmp_path)
    assert load_config(path, database="override.db").database_path == tmp_path / "override.db"


@pytest.mark.parametrize(
    "value, seconds",
    [("30s", 30), ("15m", 900), ("1h", 3600), ("2d", 172800), (" 5 m ", 300), (90, 90)],
)
def test_durations(value, seconds):
    assert parse_duration(value) == seconds


@pytest.mark.parametrize("value", [0.5, 90.0, True, 0, -1, "0.5m", "90"])
def test_fractions_and_other_non_durations_are_refused(value):
    with pytest.raises(ValueError, match="must be a duration"):
        parse_duration(value)


def test_duplicate_yaml_keys_are_refused_naming_key_and_line(tmp_path, qsite):
    path = write(tmp_path, "site_export:\n  source: e.json\n  every: 1h\n  every: 2h\n")
    message = error_of(path)
    assert message.startswith(f"{path}: ") and "duplicate key 'every' at line 4 (first at line 3)" in message
    # keys merged in with `<<:` may still be overridden
    merged = write(tmp_path, "defaults: &d {every: 1h, source: e.json}\nsite_export:\n  <<: *d\n  every: 2h\n", "merged.yml")
    assert error_of(merged).endswith("defaults: unknown key")
    result = qsite("migrate", "--config", str(path))
    assert result.returncode == 2 and "duplicate key 'every'" in result.stderr


def test_missing_file(tmp_path):
    missing = tmp_path / "nope.yml"
    assert error_of(missing) == f"{missing}: config file not found"


def test_yaml_syntax_error_names_the_file(tmp_path):
    path = write(tmp_path, "site_export: [unclosed\n")
    message = error_of(path)
    assert message.startswith(f"{path}: not valid YAML") and "line" in message


@pytest.mark.parametrize("text", ["", "- just\n- a list\n", "42\n"])
def test_not_a_mapping(tmp_path, text):
    path = write(tmp_path, text)
    assert error_of(path).startswith(f"{path}: must be a YAML mapping")


@pytest.mark.parametrize(
    "text, problem",
    [
        # an unknown key names the key meant, where one is close (as the API's parameters do)
        ("databse: x.db\n" + MINIMAL, "databse: unknown key (did you mean 'database'?)"),
        ("site_export:\n  source: e.json\n  evry: 1h\n", "site_export.evry: unknown key (did you mean 'every'?)"),
        (MINIMAL + "api:\n  workrs: 2\n", "api.workrs: unknown key (did you mean 'workers'?)"),
        (MINIMAL + "news:\n  sources:\n    - {name: A, url: a.xml, tag: Science, rulez: []}\n", "news.sources[0].rulez: unknown key (did you mean 'rules'?)"),
        ("path: /tmp\n" + MINIMAL, "path: unknown key"),
        (MINIMAL + "api:\n  cache_max_age: lots\n", "api.cache_max_age: Input should be a valid integer"),
        (MINIMAL + "api:\n  cache_max_age: -1\n", "api.cache_max_age: Input should be greater than or equal to 0"),
        (MINIMAL + "news:\n  retention_days: 0\n", "news.retention_days: Input should be greater than 0"),
        (MINIMAL + "news: []\n", "news: Input should be a valid dictionary"),
        # with no proxy in front, X-Forwarded-Proto is whatever the client wrote
        (MINIMAL + "api:\n  forwarded_proto: true\n", "api.forwarded_proto: needs api.trusted_proxies of 1 or more"),
        ("site_export:\n  source: e.json\n  every: 1 fortnight\n", "site_export.every: must be a duration such as 30s, 15m, 1h or 1d"),
        ("site_export:\n  source: e.json\n  every: 0m\n", "site_export.every: must be a duration"),
        (MINIMAL + "news:\n  every: yes\n", "news.every: must be a duration"),
        ("site_export:\n  source: e.json\n  every: 0.5\n", "site_export.every: must be a duration such as 30s, 15m, 1h or 1d, or a whole number of seconds (at least 1) (got 0.5)"),
        (MINIMAL + "news:\n  every: 90.0\n", "news.every: must be a duration"),
        (MINIMAL + "news:\n  every: -5\n", "news.every: must be a duration"),
        ('site_export:\n  source: "http://[::1/export.json"\n', "site_export.source: is not a valid URL"),
        ("site_export:\n  source: https:///export.json\n", "site_export.source: is not a valid URL: no host"),
        (MINIMAL + 'news:\n  sources:\n    - {name: A, url: "http://[::1/feed", tag: Science}\n', "news.sources[0].url: is not a valid URL"),
        (MINIMAL + "news:\n  sources:\n    - {name: A, url: 'http://127.0.0.1:99999/feed', tag: Science}\n", "news.sources[0].url: is not a valid URL: port 99999"),
        (  # the value as written, the port included, credentials still out of it
            "site_export:\n  source: 'http://user:secret@host:99999/x'\n",
            "site_export.source: is not a valid URL: port 99999 is not 1-65535 (got 'http://host:99999/x')",
        ),
        (MINIMAL + "news:\n  sources:\n    - {name: A, url: 'https://xn--a.example/feed', tag: Science}\n", "news.sources[0].url: is not a valid URL"),
        ("database: x.db\n", "site_export: required key is missing"),
        ("site_export: {}\n", "site_export.source: required key is missing"),
        (MINIMAL + "news:\n  sources:\n    - {name: A, url: a.xml, tag: Sports}\n", "news.sources[0].tag: must be one of Science, Industry, Investing (got 'Sports')"),
        (MINIMAL + "news:\n  sources:\n    - {name: A, url: a.xml, tag: Science, colour: red}\n", "news.sources[0].colour: unknown key"),
        (
            MINIMAL + "news:\n  sources:\n    - {name: A, url: a.xml, tag: Science}\n    - {name: A, url: b.xml, tag: Industry}\n",
            "news.sources: duplicate source name 'A'",
        ),
        (
            MINIMAL + "news:\n  sources:\n    - {name: A, url: a.xml, tag: Science, rules: [{match: '(', tag: Industry}]}\n",
            "news.sources[0].rules[0].match: is not a valid regular expression",
        ),
    ],
)
def test_bad_values_name_the_file_and_the_key(tmp_path, text, problem):
    path = write(tmp_path, text)
    message = error_of(path)
    assert message.startswith(f"{path}: invalid config\n")
    assert problem in message, message


@pytest.mark.parametrize("written", ["science", "SCIENCE", " Science "])
def test_a_tag_in_any_case_is_the_tag_it_names(tmp_path, written):
    rules = f"[{{match: qubit, tag: {written.strip().lower()}}}]"
    path = write(tmp_path, MINIMAL + f"news:\n  sources:\n    - {{name: A, url: a.xml, tag: '{written}', rules: {rules}}}\n")
    source = load_config(path).news.sources[0]
    assert source.tag == "Science" and source.rules[0].tag == "Science"


def test_every_bad_key_is_listed(tmp_path):
    path = write(tmp_path, "databse: x\nsite_export:\n  source: e.json\n  every: soon\napi:\n  cache_max_age: x\n")
    lines = error_of(path).splitlines()[1:]
    assert sorted(line.split(":")[0].strip() for line in lines) == ["api.cache_max_age", "databse", "site_export.every"]



@pytest.mark.parametrize("written", ["off", "Off", "OFF", "false", "no", '"off"', "'OFF'"])
def test_rate_limit_off_bare_or_quoted(tmp_path, written):
    """A bare ``off`` is YAML's false (as are ``false`` and ``no``): it means off, as the quoted word does."""
    config = load_config(write(tmp_path, MINIMAL + f"api:\n  rate_limit: {written}\n  workers: 2\n"))
    assert parse_rate_limit(config.api.rate_limit) is None
    assert serving_workers(config.api) == 2  # nothing counted in memory://, so workers may share it


@pytest.mark.parametrize("written", ["on", "yes", "true"])
def test_rate_limit_yaml_true_is_refused(tmp_path, written):
    message = error_of(write(tmp_path, MINIMAL + f"api:\n  rate_limit: {written}\n"))
    assert "api.rate_limit: must be one limit such as 120/minute" in message and "got true" in message, message

# --- through the real command ---------------------------------------------------------


@pytest.mark.slow
def test_bad_config_exits_2_with_file_and_key(tmp_path, qsite):
    path = write(tmp_path, MINIMAL + "api:\n  cache_max_age: soon\n")
    for command in (["migrate"], ["ingest", "site"]):
        result = qsite(*command, "--config", str(path))
        assert result.returncode == 2, result.stderr
        assert str(path) in result.stderr and "api.cache_max_age" in result.stderr
    assert not (tmp_path / "site.db").exists()  # a refused config touches nothing

    bad_url = write(tmp_path, MINIMAL + 'news:\n  sources:\n    - {name: A, url: "http://[::1/feed", tag: Science}\n', "bad-url.yml")
    result = qsite("ingest", "news", "--config", str(bad_url))
    assert result.returncode == 2 and "news.sources[0].url: is not a valid URL" in result.stderr, result.stderr
    assert "Traceback" not in result.stderr

    missing = qsite("migrate", "--config", str(tmp_path / "missing.yml"))
    assert missing.returncode == 2 and f"{tmp_path / 'missing.yml'}: config file not found" in missing.stderr


@pytest.mark.slow
def test_env_and_options_select_config_and_database(tmp_path, qsite):
    good = write(tmp_path, "database: from-config.db\n" + MINIMAL, "good/qsite.yml")
    bad = write(tmp_path, "nonsense: 1\n", "bad/qsite.yml")

    def db_used(*args, **env):
        result = qsite("migrate", *args, env={"QSITE_DB": "", **env}, cwd=tmp_path)
        assert result.returncode == 0, result.stderr
        return result.stdout.split(": schema up to date")[0]

    assert db_used(QSITE_CONFIG=str(good)) == str(tmp_path / "good" / "from-config.db")
    # --config wins over QSITE_CONFIG
    assert db_used("--config", str(good), QSITE_CONFIG=str(bad)) == str(tmp_path / "good" / "from-config.db")
    # QSITE_DB and --db override the config's database; --db wins; relative to the working folder
    assert db_used(QSITE_CONFIG=str(good), QSITE_DB="env.db") == str(tmp_path / "env.db")
    assert db_used("--db", "opt.db", QSITE_CONFIG=str(good), QSITE_DB="env.db") == str(tmp_path / "opt.db")
    assert (tmp_path / "opt.db").exists() and (tmp_path / "env.db").exists()

    refused = qsite("migrate", env={"QSITE_CONFIG": str(bad)}, cwd=tmp_path)
    assert refused.returncode == 2 and f"{bad}: invalid config" in refused.stderr and "nonsense: unknown key" in refused.stderr
