"""SQLite files a user names (``ldr=sqlite:///...``, ``state=``) are created under the state
directory or in a directory that exists - never a tree made wherever a typo points - and a file
that is there but is not SQLite is refused without a byte of it written."""

from __future__ import annotations

import os

import pytest

from rdss.host.statedir import StateError, state_directory
from rdss.repository.sqlite import SqliteRepository


@pytest.fixture(autouse=True)
def _state(tmp_path, monkeypatch):
    monkeypatch.setenv("XDG_STATE_HOME", str(tmp_path / "xdg"))
    monkeypatch.setenv("HOME", str(tmp_path / "home"))


def test_made_under_the_state_directory(tmp_path):
    SqliteRepository(state_directory() / "deep" / "ldr.sqlite", "app")
    assert (tmp_path / "xdg" / "rdss" / "deep" / "ldr.sqlite").is_file()


def test_made_in_a_directory_that_exists(tmp_path):
    SqliteRepository(tmp_path / "ldr.sqlite", "app")
    assert (tmp_path / "ldr.sqlite").is_file()


def test_never_a_directory_tree_elsewhere(tmp_path):
    with pytest.raises(StateError, match="does not exist"):
        SqliteRepository(tmp_path / "typo" / "dir" / "ldr.sqlite", "app")
    assert not (tmp_path / "typo").exists()


def test_a_file_that_is_not_sqlite_is_left_untouched(tmp_path):
    passwd = tmp_path / "passwd"
    passwd.write_bytes(b"root:x:0:0:root:/root:/bin/bash\n")
    with pytest.raises(StateError, match="not a SQLite file"):
        SqliteRepository(passwd, "app")
    assert passwd.read_bytes() == b"root:x:0:0:root:/root:/bin/bash\n"
    with pytest.raises(StateError, match="is a directory"):
        SqliteRepository(tmp_path, "app")


def test_a_fifo_planted_as_the_file_is_refused_at_once(tmp_path):
    fifo = tmp_path / "state.sqlite"
    os.mkfifo(fifo)  # opening it to read its header would wait for a writer for ever
    with pytest.raises(StateError, match="not a regular file"):
        SqliteRepository(fifo, "app")


def test_a_relative_xdg_state_home_is_ignored(monkeypatch, tmp_path):
    monkeypatch.setenv("XDG_STATE_HOME", "relative/state")
    assert state_directory() == tmp_path / "home" / ".local" / "state" / "rdss"


def test_a_file_written_before_the_translation_columns_gains_them_and_keeps_its_entries(tmp_path):
    """A Local Data Repository file from before entries recorded a translation (issue 31) reads
    back as it was, and records translated entries from then on."""
    import sqlite3

    from rdss.repository.entries import RECEIVED, Entry

    path = tmp_path / "ldr.sqlite"
    old = sqlite3.connect(path)
    old.execute(
        "CREATE TABLE messages (application TEXT NOT NULL, message_id TEXT NOT NULL, message_class TEXT, "
        "message_type TEXT, sequence TEXT, position INTEGER, status TEXT NOT NULL, return_address TEXT, "
        "correlation_id TEXT, updated REAL NOT NULL, error_code TEXT, PRIMARY KEY (application, message_id))"
    )
    old.execute(
        "INSERT INTO messages VALUES ('app', 'm1', 'Event', 'MetadataCreate', '', 1, 'RECEIVED', NULL, NULL, 0, NULL)"
    )
    old.commit()
    old.close()
    repository = SqliteRepository(path, "app")
    assert repository.entry("m1") == Entry("m1", "Event", "MetadataCreate", "", 1, RECEIVED)
    header = {"messageId": "m2", "messageClass": "Event", "messageType": "MetadataCreate", "version": "3.0.2"}
    repository.record([Entry.of(header, RECEIVED, translated_from="3.0.2", delivered_as="4.0.0")])
    translated = repository.entry("m2")
    assert translated is not None
    assert (translated.translated_from, translated.delivered_as) == ("3.0.2", "4.0.0")
    assert translated.attributes()["deliveredAs"] == "4.0.0"
