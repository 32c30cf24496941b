"""Issue 63: a database URL pasted without its scheme (``user:p@ss@host:5432/db``) gives up its password pieces as a
``postgresql://`` one does (``redaction.url_secrets``), read as the text after ``scheme://`` — while the look-alikes a
message carries (an email address, a ``host:port``, a time, a file's path) are no credential and stay as written."""

from __future__ import annotations

import pytest

from ba_mcp import redaction

LOOK_ALIKES = (
    "mail bob@example.com about it",
    "could not connect to db.example.com:5432",
    "the report runs at 12:30 every day",
    "read data/q3@2026.db",
)


@pytest.mark.parametrize(
    ("url", "password"),
    [
        ("ba_reader:Qz7xK9vL@db.example.com:5432/aw", "Qz7xK9vL"),
        ("ba_reader:p@ssw#rd@db.example.com:5432/aw", "p@ssw#rd"),  # reserved characters, as pasted
        ("ba_reader:Qz7%40xK9v@127.0.0.1:55433/aw", "Qz7%40xK9v"),  # percent-encoded: both forms
    ],
)
def test_a_url_without_scheme_gives_up_its_password_as_one_with_it(url: str, password: str) -> None:
    with_scheme = redaction.url_secrets("postgresql://" + url)
    without = redaction.url_secrets(url)
    assert password in without and password in with_scheme
    assert set(with_scheme) <= set(without) | {"postgresql://" + url}
    message = f"connection to {url.rpartition('@')[2]} failed: password authentication failed ({password})"
    shown = redaction.redact(message, without)
    assert password not in shown and redaction.MASK in shown
    assert "db.example.com" in shown or "127.0.0.1" in shown  # the host is no secret
    shown_url = redaction.masked_url(url)
    assert password not in shown_url and "Qz7" not in shown_url and "ssw" not in shown_url, shown_url
    assert shown_url.endswith(url.rpartition("@")[2])
    for text in LOOK_ALIKES:  # none of what was picked out masks a look-alike
        assert redaction.redact(text, without) == text, (url, text)


@pytest.mark.parametrize("text", ["bob@example.com", "db.example.com:5432", "12:30", "data/q3@2026.db", "me@host/db"])
def test_look_alikes_are_no_credentials(text: str) -> None:
    # an email address, a host:port, a time, a path, a plain user name: nothing to pick out, shown as written
    assert redaction.url_secrets(text) == []
    assert redaction.masked_url(text) == text
    for other in LOOK_ALIKES:
        assert redaction.redact(other, redaction.url_secrets(text)) == other
