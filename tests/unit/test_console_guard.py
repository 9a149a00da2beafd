"""rdss console's guard, without a browser (tests/console drives Chromium): the token, the Host
check, the security headers, and when an action is refused."""

from __future__ import annotations

from typing import Any

import pytest
from botocore.exceptions import ClientError

from rdss.deployment.topology import Deployment
from rdss.status import console
from rdss.status.sources import ConsoleSource


class Recorded(ConsoleSource):
    """A source whose redrive and replay cancel only record that they ran."""

    def __init__(self) -> None:
        super().__init__(Deployment("unit"), client=self._no_client)
        self.redriven: list[str | None] = []
        self.cancelled: list[str] = []

    @staticmethod
    def _no_client(service: str) -> Any:
        raise AssertionError(f"no {service} here")

    def status(self) -> dict[str, Any]:
        return {"parkedBatches": {"broker": 1}}

    def parked(self) -> dict[str, Any]:
        return {"lines": [], "ok": True, "batches": 0}

    def redrive(self, processor: str | None) -> dict[str, Any]:
        self.redriven.append(processor)
        return {"lines": ["redrove 1 parked batch(es), 1 record(s)"], "ok": True, "batches": 1}

    def replays(self) -> list[dict[str, Any]]:
        return []

    def cancel_replay(self, name: str) -> bool:
        self.cancelled.append(name)
        return True


#: Every action the console has, and a form for it.
ACTIONS = [("/parked/redrive", {"processor": "broker"}), ("/replays/cancel", {"name": "fix-1"})]


def client(allow_actions: bool) -> tuple[Any, console.Settings, Recorded]:
    source = Recorded()
    settings = console.Settings(allow_actions=allow_actions, port=8765)
    app = console.create_app(source, settings)
    test = app.test_client()
    test.set_cookie(console.COOKIE, settings.token, domain="127.0.0.1")
    return test, settings, source


BASE = {"base_url": "http://127.0.0.1:8765"}


def test_the_token_url_sets_the_cookie_and_leaves_the_address() -> None:
    app = console.create_app(Recorded(), settings := console.Settings(port=8765))
    test = app.test_client()
    assert test.get("/static/console.css", **BASE).status_code == 403
    answer = test.get(f"/static/console.css?token={settings.token}&x=%3Cb%3E", **BASE)
    assert answer.status_code == 303
    assert answer.headers["Location"] == "/static/console.css?x=%3Cb%3E"
    assert f"{console.COOKIE}={settings.token}" in answer.headers["Set-Cookie"]
    assert "HttpOnly" in answer.headers["Set-Cookie"]
    assert "SameSite=Strict" in answer.headers["Set-Cookie"]
    # a path of two slashes would be a redirect to another host: it stays on this one
    answer = test.get(
        "/", query_string={"token": settings.token}, environ_overrides={"PATH_INFO": "//evil.example/"}, **BASE
    )
    assert answer.headers["Location"] == "/evil.example/"


def test_every_answer_carries_the_policy() -> None:
    test, _, _ = client(allow_actions=False)
    answer = test.get("/static/console.css", **BASE)
    assert answer.status_code == 200
    policy = answer.headers["Content-Security-Policy"]
    assert "script-src 'self'" in policy
    assert "unsafe-inline" not in policy
    assert "default-src 'none'" in policy
    assert answer.headers["X-Content-Type-Options"] == "nosniff"


@pytest.mark.parametrize("host", ["attacker.example:8765", "127.0.0.1:9999", "0.0.0.0:8765"])
def test_another_host_name_is_not_served(host: str) -> None:
    test, _, _ = client(allow_actions=False)
    assert test.get("/static/console.css", base_url=f"http://{host}").status_code == 421


@pytest.mark.parametrize(("path", "form"), ACTIONS)
def test_read_only_refuses_every_action(path: str, form: dict[str, str]) -> None:
    test, settings, source = client(allow_actions=False)
    answer = test.post(
        path,
        data={"csrf": settings.csrf, **form},
        headers={"Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-origin"},
        **BASE,
    )
    assert answer.status_code == 403
    assert b"read-only" in answer.data
    assert (source.redriven, source.cancelled) == ([], [])


@pytest.mark.parametrize(
    ("headers", "csrf", "why"),
    [
        ({}, True, b"no Origin"),
        ({"Origin": "http://attacker.example"}, True, b"another origin"),
        ({"Origin": "null"}, True, b"another origin"),
        ({"Sec-Fetch-Site": "cross-site"}, True, b"another site"),
        ({"Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-site"}, True, b"another site"),
        ({"Origin": "http://127.0.0.1:8765"}, False, b"CSRF"),
    ],
)
@pytest.mark.parametrize(("path", "form"), ACTIONS)
def test_an_action_needs_the_same_origin_and_the_forms_token(
    headers: dict[str, str], csrf: bool, why: bytes, path: str, form: dict[str, str]
) -> None:
    test, settings, source = client(allow_actions=True)
    answer = test.post(path, data={"csrf": settings.csrf if csrf else "guess", **form}, headers=headers, **BASE)
    assert answer.status_code == 403
    assert why in answer.data
    assert (source.redriven, source.cancelled) == ([], [])


def test_an_action_from_the_page_itself_runs() -> None:
    test, settings, source = client(allow_actions=True)
    answer = test.post(
        "/parked/redrive",
        data={"csrf": settings.csrf, "processor": "broker"},
        headers={"Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-origin"},
        **BASE,
    )
    assert answer.status_code == 200, answer.data
    assert source.redriven == ["broker"]
    assert b"redrove 1 parked batch(es)" in answer.data
    answer = test.post(
        "/replays/cancel",
        data={"csrf": settings.csrf, "name": "<b>fix-1</b>"},
        headers={"Origin": "http://127.0.0.1:8765", "Sec-Fetch-Site": "same-origin"},
        **BASE,
    )
    assert answer.status_code == 200, answer.data
    assert source.cancelled == ["<b>fix-1</b>"]
    assert b"replay &lt;b&gt;fix-1&lt;/b&gt; cancelled" in answer.data  # the name said as text


def test_a_deployment_gone_is_one_line_not_a_traceback() -> None:
    class Gone(Recorded):
        def status(self) -> dict[str, Any]:
            raise ClientError({"Error": {"Code": "ResourceNotFoundException", "Message": "no stream"}}, "ListShards")

    settings = console.Settings(port=8765)
    test = console.create_app(Gone(), settings).test_client()
    test.set_cookie(console.COOKIE, settings.token, domain="127.0.0.1")
    answer = test.get("/", **BASE)
    assert answer.status_code == 502
    assert answer.data == b"cannot read the deployment: ResourceNotFoundException: no stream\n"
