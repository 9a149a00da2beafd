"""rdss console in Debian's headless Chromium, against a local runtime after a realistic
workload: the overview's counts are what the deployment holds (the demo's accounting), a
messageId search shows rdss trace's timeline, a parked batch is redriven from the page, a
message carrying markup and script is shown as text with no script run, and a request without
the token or an action from another origin is refused; the replays page shows each replay's
progress and cancels one. Each page's screenshot is kept under
build/console/ (the docs show them: make console-screenshots)."""

from __future__ import annotations

import http.server
import threading
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Iterator
from datetime import timedelta
from typing import Any

import pytest
from selenium import webdriver
from selenium.webdriver.common.by import By
from selenium.webdriver.support.wait import WebDriverWait

from rdss.local.accounting import account, read_channel
from rdss.model import timestamps
from rdss.processors import replay as replay_module
from rdss.processors.replay import Replayer, Selection, Spec
from rdss.processors.replay_progress import ReplayExists
from rdss.status import console
from rdss.status.snapshot import Snapshot
from rdss.status.sources import ConsoleSource
from tests.console.conftest import PAYLOADS, SCREENSHOTS, SENTINEL, Deployed, Served
from tests.support.browser import wait_drawn

pytestmark = pytest.mark.integration


def page(browser: webdriver.Chrome, served: Served, path: str, shot: str | None = None) -> str:
    browser.get(served.base + path)
    if shot:
        browser.save_screenshot(str(SCREENSHOTS / f"console-{shot}.png"))
    return str(browser.page_source)


def no_script_ran(browser: webdriver.Chrome) -> None:
    """No payload ran (its sentinel never logged), nor even tried to: the policy would have
    stopped an inline script or handler and said so, which would mean markup got through."""
    logs = [entry["message"] for entry in browser.get_log("browser")]
    assert not [line for line in logs if SENTINEL in line], logs
    assert not [line for line in logs if "Content Security Policy" in line], logs


@pytest.fixture(scope="module")
def signed_in(browser: webdriver.Chrome, served: Served) -> webdriver.Chrome:
    """The browser after opening the printed URL: the token is a cookie, and out of the address."""
    browser.get(served.url)
    assert "token=" not in browser.current_url
    assert browser.get_cookie("rdss_console") is not None
    return browser


def test_the_overview_counts_are_the_deployments_own(signed_in: webdriver.Chrome, served: Served, deployed: Deployed):
    page(signed_in, served, "/", "overview")
    accounted = account(deployed.runtime, deployed.inputs())
    shown = {
        row.get_attribute("data-channel"): int(row.find_element(By.CSS_SELECTOR, '[data-count="lastDay"]').text)
        for row in signed_in.find_elements(By.CSS_SELECTOR, "#channels tr[data-channel]")
    }
    assert shown == accounted.channels
    assert shown["input"] == len(deployed.published)
    parked = int(signed_in.find_element(By.CSS_SELECTOR, '#parked [data-parked="broker"]').text)
    assert parked == deployed.runtime.failed_batches()["broker"] >= 1
    # the consumer group that read part of metadata: behind by the age of what it left unread
    lag = [
        [cell.text for cell in row.find_elements(By.TAG_NAME, "td")]
        for row in signed_in.find_elements(By.CSS_SELECTOR, "#lag tr")[1:]
    ]
    assert [(group, channel) for group, channel, *_ in lag] == [("archive", "metadata")]
    assert float(lag[0][3]) > 0
    # the forged error code shows as the text it is
    codes = [cell.text for cell in signed_in.find_elements(By.CSS_SELECTOR, "#error-codes td.text")]
    assert PAYLOADS[0] in codes
    no_script_ran(signed_in)


def test_the_charts_draw_from_the_same_records(signed_in: webdriver.Chrome, served: Served, deployed: Deployed):
    page(signed_in, served, "/charts")
    wait_drawn(signed_in, {"channels", "errors", "latency"})
    total = signed_in.execute_script(
        "return Chart.getChart(document.querySelector('canvas[data-chart=channels]'))"
        ".data.datasets.find(d => d.label === 'input').data.reduce((a, b) => a + b, 0)"
    )
    assert total == len(deployed.published)
    routed = signed_in.find_elements(By.CSS_SELECTOR, "#latency tr td:first-child")
    assert routed, "the latency from input to a routed channel is measured"
    signed_in.save_screenshot(str(SCREENSHOTS / "console-charts.png"))
    no_script_ran(signed_in)


def test_a_message_search_shows_its_timeline(signed_in: webdriver.Chrome, served: Served, deployed: Deployed):
    page(signed_in, served, "/messages")
    box = signed_in.find_element(By.ID, "id")
    box.send_keys(deployed.routed)
    box.submit()
    assert signed_in.find_element(By.ID, "message-id").text == deployed.routed
    assert signed_in.find_element(By.ID, "summary").text.startswith("routed to ")
    events = signed_in.find_elements(By.CSS_SELECTOR, "#timeline tr td:nth-child(2)")
    assert {"input", "broker"} <= {e.text for e in events}
    signed_in.save_screenshot(str(SCREENSHOTS / "console-messages.png"))


def test_a_message_carrying_markup_is_shown_as_text_and_no_script_runs(
    signed_in: webdriver.Chrome, served: Served, deployed: Deployed
):
    page(signed_in, served, "/messages?id=" + deployed.hostile, "message-markup")
    assert signed_in.find_element(By.ID, "message-id").text == deployed.hostile
    error = signed_in.find_element(By.ID, "error").text
    assert error.startswith("GENERR010: ")
    assert PAYLOADS[1] in error  # the description quotes the correlationId: shown as the text it is
    # no element the payloads would have made exists: they are text
    assert not signed_in.find_elements(By.CSS_SELECTOR, "main img, main script")
    for payload in PAYLOADS:  # the search's own link and field hold the javascript: text inert too
        page(signed_in, served, "/messages?id=" + urllib.parse.quote(payload, safe=""))
        assert signed_in.find_element(By.ID, "id").get_attribute("value") == payload
        assert not signed_in.find_elements(By.CSS_SELECTOR, "main img, main script")
    no_script_ran(signed_in)


def test_a_parked_batch_is_redriven_from_the_page(signed_in: webdriver.Chrome, served: Served, deployed: Deployed):
    text = page(signed_in, served, "/parked", "parked")
    assert "would put back" in text
    deployed.poisoned.ids.clear()  # the cause fixed: the broker takes them now
    signed_in.find_element(By.ID, "redrive-broker").click()
    outcome = WebDriverWait(signed_in, 120).until(lambda b: b.find_elements(By.ID, "outcome"))[0].text
    assert outcome.splitlines()[-1].startswith("redrove "), outcome
    deployed.runtime.drain()
    assert deployed.runtime.failed_batches()["broker"] == 0
    after = account(deployed.runtime, deployed.inputs())
    assert "unaccounted" not in after.outcomes()
    assert all(after.routed_ids[i] == 1 for i in deployed.stuck)
    page(signed_in, served, "/parked")
    assert signed_in.find_element(By.CSS_SELECTOR, '[data-parked="broker"]').text == "0"


def test_the_report_page_says_how_to_give_one(signed_in: webdriver.Chrome, served: Served):
    text = page(signed_in, served, "/report", "report-none")
    assert "rdss console --report DIR" in text


def fetch(url: str, *, data: bytes | None = None, headers: dict[str, str] | None = None) -> tuple[int, str]:
    request = urllib.request.Request(url, data=data, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            return response.status, response.read().decode()
    except urllib.error.HTTPError as error:
        return error.code, error.read().decode()


def test_nothing_is_served_without_the_token(served: Served):
    for path in ("/", "/charts", "/messages?id=x", "/parked", "/static/console.css", "/static/vendor/chart.umd.min.js"):
        status, body = fetch(served.base + path)
        assert status == 403, path
        assert body.startswith("refused: ")
    status, _ = fetch(served.base + "/", headers={"Cookie": "rdss_console=not-the-token"})
    assert status == 403
    status, _ = fetch(served.base + "/?token=not-the-token")
    assert status == 403
    # another name for this address (a rebinding attacker's) is not served either
    status, _ = fetch(
        served.base + "/", headers={"Host": "attacker.example", "Cookie": f"rdss_console={served.settings.token}"}
    )
    assert status == 421


class Attacker(http.server.BaseHTTPRequestHandler):
    """Another origin's page that makes the browser post the console's redrive form at once."""

    target = ""
    csrf = ""

    def do_GET(self) -> None:
        body = (
            f'<form id="f" method="post" action="{self.target}"><input name="csrf" value="{self.csrf}">'
            '<input name="processor" value="broker"></form><script>document.getElementById("f").submit()</script>'
        ).encode()
        self.send_response(200)
        self.send_header("Content-Type", "text/html")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: Any) -> None:
        pass


@pytest.fixture
def attacker(served: Served) -> Iterator[str]:
    Attacker.target = served.base + "/parked/redrive"
    Attacker.csrf = served.settings.csrf  # even knowing the CSRF token, the origin gives it away
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Attacker)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}/"
    server.shutdown()
    server.server_close()


def test_an_action_from_another_origin_is_refused(
    signed_in: webdriver.Chrome, served: Served, deployed: Deployed, attacker: str
):
    sqs = deployed.runtime.endpoint.client("sqs")
    queue = sqs.get_queue_url(QueueName=deployed.runtime.deployment.on_failure_queue("broker"))["QueueUrl"]
    sqs.send_message(QueueUrl=queue, MessageBody='{"not": "a pointer"}')  # something a redrive would report
    signed_in.get(attacker)
    WebDriverWait(signed_in, 60).until(lambda b: b.current_url.startswith(served.base))
    assert "refused: an action from another origin" in signed_in.find_element(By.TAG_NAME, "body").text
    # without the browser: no Origin, a wrong CSRF token, or no token at all - refused alike
    cookie = {"Cookie": f"rdss_console={served.settings.token}"}
    form = f"csrf={served.settings.csrf}&processor=broker".encode()
    assert fetch(served.base + "/parked/redrive", data=form, headers=cookie)[0] == 403
    origin = {**cookie, "Origin": served.base}
    assert fetch(served.base + "/parked/redrive", data=b"csrf=wrong&processor=broker", headers=origin)[0] == 403
    assert fetch(served.base + "/parked/redrive", data=form, headers={"Origin": served.base})[0] == 403
    assert deployed.runtime.failed_batches()["broker"] == 1  # nothing was redriven
    sqs.purge_queue(QueueUrl=queue)


def shown_replays(browser: webdriver.Chrome) -> dict[str, dict[str, str]]:
    """Each row of the replays table: its status and counts, as the page says them."""
    rows = {}
    for row in browser.find_elements(By.CSS_SELECTOR, "#replays tr[data-replay]"):
        cells = {c.get_attribute("data-count"): c.text for c in row.find_elements(By.CSS_SELECTOR, "[data-count]")}
        cells["status"] = row.find_element(By.CSS_SELECTOR, '[data-field="status"]').text
        cells["filters"] = row.find_elements(By.TAG_NAME, "td")[4].text
        rows[str(row.get_attribute("data-replay"))] = cells
    return rows


def test_the_replays_page_shows_each_replays_progress_and_cancels_one(
    signed_in: webdriver.Chrome, served: Served, deployed: Deployed, monkeypatch: pytest.MonkeyPatch
):
    runtime = deployed.runtime
    until = timestamps.now()
    window = Selection(since=until - timedelta(days=1), until=until)
    on_input = len(read_channel(runtime, "input"))  # each arrived in the window and is archived (drained)
    replayer = Replayer(runtime.deployment, runtime.endpoint.client)
    monkeypatch.setattr(replay_module, "BATCH", 5)
    # one stopped after its first batch (as a Ctrl-C would), one of two messageIds - one of them markup
    batches: list[object] = []
    halted = replayer.run(Spec("halted", window), on_batch=batches.append, stop=lambda: bool(batches))
    assert (halted.status, halted.sent) == ("interrupted", 5)
    ids = (deployed.routed, PAYLOADS[0])
    by_id = replayer.run(Spec("by-id", Selection(window.since, window.until, ids=ids)))
    assert (by_id.status, by_id.selected, by_id.sent) == ("done", 1, 1)
    assert replayer.run(Spec("ghost", window), dry_run=True).status == "dry run"  # leaves no replay

    page(signed_in, served, "/replays", "replays")
    shown = shown_replays(signed_in)
    progress = {name: replayer.progress.get(name) for name in ("halted", "by-id")}
    assert set(shown) == {"halted", "by-id"}
    assert shown["halted"] | {"filters": "-"} == {
        "status": "interrupted",
        "selected": str(on_input),
        "sent": str(progress["halted"]["sent"]),  # type: ignore[index]
        "remaining": str(on_input - 5),
        "filters": "-",
    }
    assert progress["halted"]["sent"] == 5  # type: ignore[index]
    assert shown["by-id"] | {"filters": "-"} == {
        "status": "done",
        "selected": "1",
        "sent": str(progress["by-id"]["sent"]),  # type: ignore[index]
        "remaining": "0",
        "filters": "-",
    }
    assert shown["halted"]["filters"] == "none"
    assert PAYLOADS[0] in shown["by-id"]["filters"]  # the markup messageId, as text
    assert not signed_in.find_elements(By.CSS_SELECTOR, "main img, main script")
    # rdss status lists them too
    listed = Snapshot(runtime.deployment, runtime.endpoint.client).take().as_dict()["replays"]
    assert [(r["name"], r["status"], r["sent"]) for r in listed] == [("halted", "interrupted", 5), ("by-id", "done", 1)]

    page(signed_in, served, "/replays/by-id", "replay")
    assert [li.text for li in signed_in.find_elements(By.CSS_SELECTOR, "#ids li")] == list(ids)
    assert signed_in.find_element(By.CSS_SELECTOR, '#replay [data-count="remaining"]').text == "0"
    assert not signed_in.find_elements(By.CSS_SELECTOR, "main img, main script")
    no_script_ran(signed_in)

    # a read-only console shows no Cancel, and refuses one from its own page's origin with its tokens
    source = ConsoleSource(runtime.deployment, runtime.endpoint.client)
    server, settings = console.serve(source)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        base, cookie = f"http://127.0.0.1:{settings.port}", {"Cookie": f"rdss_console={settings.token}"}
        status, body = fetch(base + "/replays", headers=cookie)
        assert status == 200
        assert "data-replay=" in body
        assert "data-cancel=" not in body
        form = f"csrf={settings.csrf}&name=halted".encode()
        status, body = fetch(base + "/replays/cancel", data=form, headers={**cookie, "Origin": base})
        assert (status, body) == (403, "refused: read-only: start rdss console with --allow-actions to act\n")
    finally:
        server.shutdown()
        server.server_close()
    # nor from here without the page's origin
    form = f"csrf={served.settings.csrf}&name=halted".encode()
    cookie = {"Cookie": f"rdss_console={served.settings.token}"}
    assert fetch(served.base + "/replays/cancel", data=form, headers=cookie)[0] == 403
    assert replayer.progress.get("halted")["status"] == "interrupted"  # type: ignore[index]

    # with --allow-actions, from the page: cancelled, and a start refuses it
    page(signed_in, served, "/replays")
    assert not signed_in.find_elements(By.CSS_SELECTOR, '[data-cancel="by-id"]')  # done: nothing to cancel
    signed_in.find_element(By.CSS_SELECTOR, '[data-cancel="halted"]').click()
    outcome = WebDriverWait(signed_in, 60).until(lambda b: b.find_elements(By.ID, "outcome"))[0].text
    assert outcome == "replay halted cancelled"
    assert shown_replays(signed_in)["halted"]["status"] == "cancelled"
    assert shown_replays(signed_in)["halted"]["remaining"] == "-"
    assert replayer.progress.get("halted")["status"] == "cancelled"  # type: ignore[index]
    with pytest.raises(ReplayExists):
        replayer.run(Spec("halted", window))
