"""``rdss status``'s screen: every value a producer or a peer chose (an error code, a group, a
vendor, an object key) is shown as text, whatever bytes it holds; ages read as a person reads
them."""

from __future__ import annotations

from datetime import UTC, datetime

from hypothesis import given
from hypothesis import strategies as st

from rdss.cli.status import _age, lines
from rdss.status.snapshot import ChannelCounts, GroupLag, Status


def screen(text: str) -> str:
    status = Status("dev", datetime(2026, 11, 29, tzinfo=UTC))
    status.channels = [ChannelCounts("input", "rdss-dev-input", 1, 2, capped=True)]
    status.lag = [GroupLag(text, "metadata", 1, 90.0, (text,))]
    status.codes = {"invalid": {text: 3}}
    status.vendors = {text: {"produces": ["input"], "consumes": []}}
    status.archives = {"input": {"bucket": "b", "key": text, "written": "2026-11-29T00:00:00.000Z"}}
    status.alarms = [text]
    status.unread = {text: text}
    status.replays = [
        {"name": text, "status": text, "updated": text, "sent": 1, "selected": None, "into": text, "selection": {}}
    ]
    return "\n".join(lines(status.as_dict()))


@given(st.text())
def test_whatever_a_value_holds_no_control_character_reaches_the_terminal(text: str) -> None:
    shown = screen(text)
    assert not any((ord(c) < 32 and c != "\n") or 0x7F <= ord(c) < 0xA0 for c in shown)
    assert shown.count("\n") == screen("x").count("\n")  # no value adds a line


def test_a_capped_count_is_a_floor_and_ages_read_as_people_read_them() -> None:
    shown = screen("GENERR001")
    assert "1+" in shown
    assert "2+" in shown
    assert "GENERR001 3" in shown
    assert (_age(30), _age(600), _age(7200 * 3), _age(None)) == ("30 s", "10 min", "6.0 h", "-")
