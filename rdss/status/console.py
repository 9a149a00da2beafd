"""``rdss console``: a deployment's state as a web page on this machine (Flask, Jinja2).

What :mod:`rdss.status.sources` reads, on pages: the overview (``rdss status``'s snapshot), the
charts (records per channel, errors by code, latency from ``input`` to each routed channel),
a message search that opens ``rdss trace``'s timeline, the parked batches with their redrive,
the replays (``rdss replay``) with their cancelling, and an analytics report's tables as charts
(``--report``).

Who may see it, and what runs:

- It listens on 127.0.0.1 only, and answers only requests naming that address (or
  ``localhost``) with its port as their Host: a web page elsewhere cannot reach it through a
  name of its own (DNS rebinding).
- Nothing is served without the token: the URL printed at start holds it (as Jupyter's does);
  that URL sets it as a cookie (HttpOnly, SameSite=Strict) and redirects to the same page
  without it, so the token leaves no trace in the history or a Referer.
- Read-only unless started with ``allow_actions``; an action (a POST: a redrive, a replay's
  cancel) needs the token, the
  form's CSRF token, and a same-origin request (``Origin`` is this server, ``Sec-Fetch-Site``
  is ``same-origin``): a page from another site cannot make the browser act.
- Everything a message holds reaches a page through Jinja2's autoescaping, as text; chart data
  is JSON the page's script reads. The Content-Security-Policy lets only the console's own
  scripts run (``script-src 'self'``, nothing inline), and every asset ships in the package
  (Chart.js from npm, :func:`rdss.host.resources.chart_js`).

Pages are :class:`Page` entries in :data:`PAGES`: each adds its routes and its templates, and
the navigation lists it. A page of another command (``rdss replay``'s) is one more entry
there, its view reading through a method of its own on :class:`ConsoleSource`.
"""

from __future__ import annotations

import hmac
import secrets
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from botocore.exceptions import BotoCoreError, ClientError
from flask import Flask, Response, abort, redirect, render_template, request, send_file
from werkzeug.serving import BaseWSGIServer, WSGIRequestHandler, make_server

from rdss.analytics import report as analytics_report
from rdss.aws.failures import describe
from rdss.host.resources import chart_js
from rdss.status.sources import ConsoleSource

#: The cookie the token URL sets.
COOKIE = "rdss_console"
#: What every response says the browser may load and run: the console's own files, nothing inline.
POLICY = (
    "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
)
#: The longest messageId (or SHARD/SEQUENCE) searched for: a header UUID is 36 characters.
MAX_QUERY = 200


@dataclass(frozen=True)
class Settings:
    """One console's secrets and switches."""

    token: str = field(default_factory=lambda: secrets.token_urlsafe(32))
    allow_actions: bool = False
    #: the port it listens on (Host and Origin are checked against it)
    port: int = 0

    @property
    def csrf(self) -> str:
        """The forms' CSRF token: derived from the token, so no page without it can know it."""
        return hmac.new(self.token.encode(), b"rdss console csrf", "sha256").hexdigest()


@dataclass(frozen=True)
class Page:
    """One page: ``endpoint`` is its view's name (the navigation links it), ``add`` registers
    its routes on the app."""

    endpoint: str
    title: str
    add: Callable[[Flask, ConsoleSource, Settings], None]


def create_app(source: ConsoleSource, settings: Settings, pages: tuple[Page, ...] | None = None) -> Flask:
    """The console's app: :data:`PAGES` (or ``pages``) behind the token, the Host check and the
    security headers."""
    app = Flask(__name__, static_folder="static", static_url_path="/static")
    app.config.update(MAX_CONTENT_LENGTH=16_384, TEMPLATES_AUTO_RELOAD=False)
    chosen = PAGES if pages is None else pages
    navigation = [(page.endpoint, page.title) for page in chosen]

    @app.before_request
    def guard() -> Any:
        if not _host_allowed(request.host, settings.port):
            abort(421)
        offered = request.args.get("token")
        if offered is not None and hmac.compare_digest(offered.encode(), settings.token.encode()):
            rest = [(k, v) for k, v in request.args.items(multi=True) if k != "token"]
            # one leading slash: "//host" would be a redirect to another site
            target = (
                "/" + request.path.lstrip("/") + ("?" + "&".join(f"{k}={_quote(v)}" for k, v in rest) if rest else "")
            )
            response = redirect(target, code=303)
            response.set_cookie(COOKIE, settings.token, httponly=True, samesite="Strict", path="/")
            return response
        cookie = request.cookies.get(COOKIE, "")
        if not hmac.compare_digest(cookie.encode(), settings.token.encode()):
            return _refused(403, "open the URL rdss console printed (it holds the token)")
        if request.method not in ("GET", "HEAD"):
            why = _action_refused(settings)
            if why is not None:
                return _refused(403, why)
        return None

    @app.after_request
    def headers(response: Response) -> Response:
        response.headers["Content-Security-Policy"] = POLICY
        response.headers["X-Content-Type-Options"] = "nosniff"
        # same-origin, not no-referrer: under no-referrer a browser's form POST says Origin: null,
        # which the action check must refuse (the token never is in a URL a page links from)
        response.headers["Referrer-Policy"] = "same-origin"
        response.headers["Cache-Control"] = "no-store"
        response.headers["Cross-Origin-Opener-Policy"] = "same-origin"
        response.headers["Cross-Origin-Resource-Policy"] = "same-origin"
        return response

    @app.errorhandler(ClientError)
    @app.errorhandler(BotoCoreError)
    def unreadable(error: Exception) -> Response:
        # the deployment went away or cannot be reached: said as the page, not a traceback
        return Response(f"cannot read the deployment: {describe(error)}\n", status=502, mimetype="text/plain")

    @app.context_processor
    def common() -> dict[str, Any]:
        return {
            "navigation": navigation,
            "environment": source.deployment.environment,
            "allow_actions": settings.allow_actions,
            "csrf": settings.csrf,
        }

    @app.get("/static/vendor/chart.umd.min.js")
    def chart_library() -> Response:
        return send_file(chart_js(), mimetype="text/javascript", max_age=0)

    @app.get("/static/vendor/charts.js")
    def chart_renderer() -> Response:
        return Response(analytics_report.renderer(), mimetype="text/javascript")

    for page in chosen:
        page.add(app, source, settings)
    return app


def _quote(value: str) -> str:
    from urllib.parse import quote

    return quote(value, safe="")


def _host_allowed(host: str, port: int) -> bool:
    return host in (f"127.0.0.1:{port}", f"localhost:{port}")


def _action_refused(settings: Settings) -> str | None:
    """Why a state-changing request is refused; None when it may go ahead."""
    if not settings.allow_actions:
        return "read-only: start rdss console with --allow-actions to act"
    origin = request.headers.get("Origin")
    site = request.headers.get("Sec-Fetch-Site")
    if origin is None and site is None:
        return "an action must come from the console's own page (no Origin)"
    if origin is not None and not _same_origin(origin, settings.port):
        return "an action from another origin"
    if site is not None and site != "same-origin":
        return "an action from another site"
    offered = request.form.get("csrf", "")
    if not hmac.compare_digest(offered.encode(), settings.csrf.encode()):
        return "the form's CSRF token is missing or wrong"
    return None


def _same_origin(origin: str, port: int) -> bool:
    parts = urlsplit(origin)
    return parts.scheme == "http" and _host_allowed(parts.netloc, port)


def _refused(code: int, why: str) -> Response:
    return Response(f"refused: {why}\n", status=code, mimetype="text/plain")


# -- the pages --------------------------------------------------------------------------------------
def _overview(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/")
    def overview() -> str:
        return render_template("overview.html", status=source.status())


def _charts(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/charts")
    def charts() -> str:
        series = source.series()
        specs = [
            {
                "id": "channels",
                "title": "Records per channel per minute",
                "type": "line",
                "labels": series["minutes"],
                "datasets": [{"label": c, "data": v} for c, v in series["channels"].items()],
            },
            {
                "id": "errors",
                "title": "Records on invalid and error per minute, by error code",
                "type": "bar",
                "labels": series["minutes"],
                "datasets": [{"label": c, "data": v} for c, v in sorted(series["errors"].items())],
                "stacked": True,
            },
            {
                "id": "latency",
                "title": "Latency from input to each routed channel (seconds)",
                "type": "bar",
                "labels": sorted(series["latency"]),
                "datasets": [
                    {"label": what, "data": [series["latency"][c][key] or 0 for c in sorted(series["latency"])]}
                    for what, key in (("median", "medianSeconds"), ("max", "maxSeconds"))
                ],
            },
        ]
        return render_template("charts.html", series=series, charts=specs)


def _messages(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/messages")
    def messages() -> str:
        query = request.args.get("id", "").strip()[:MAX_QUERY]
        timeline = source.trace(query) if query else None
        return render_template("messages.html", query=query, timeline=timeline)


def _parked(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/parked")
    def parked() -> str:
        counts = source.status().get("parkedBatches", {})
        return render_template("parked.html", counts=counts, listing=source.parked(), outcome=None)

    @app.post("/parked/redrive")
    def redrive() -> Any:
        processor = request.form.get("processor") or None
        outcome = source.redrive(processor)
        counts = source.status().get("parkedBatches", {})
        return render_template("parked.html", counts=counts, listing=source.parked(), outcome=outcome)


def _replays(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/replays")
    def replays() -> str:
        return render_template("replays.html", replays=source.replays(), outcome=None)

    @app.get("/replays/<name>")
    def replay(name: str) -> Any:
        found = source.replay(name)
        if found is None:
            return Response("no replay of that name\n", status=404, mimetype="text/plain")
        return render_template("replay.html", replay=found)

    @app.post("/replays/cancel")
    def cancel_replay() -> Any:
        name = request.form.get("name", "")
        cancelled = source.cancel_replay(name) if name else False
        outcome = f"replay {name} cancelled" if cancelled else f"no replay {name}"
        return render_template("replays.html", replays=source.replays(), outcome=outcome)


def _report(app: Flask, source: ConsoleSource, settings: Settings) -> None:
    @app.get("/report")
    def report() -> str:
        tables = source.report_tables()
        charts = analytics_report.charts(tables) if tables is not None else []
        return render_template("report.html", report=tables, charts=charts)


#: The console's pages, in the navigation's order (see the module docstring).
PAGES: tuple[Page, ...] = (
    Page("overview", "Overview", _overview),
    Page("charts", "Charts", _charts),
    Page("messages", "Messages", _messages),
    Page("parked", "Parked batches", _parked),
    Page("replays", "Replays", _replays),
    Page("report", "Analytics report", _report),
)


class _Handler(WSGIRequestHandler):
    """Logs each request without its query: the token URL's token stays out of the log."""

    def log_request(self, code: int | str = "-", size: int | str = "-") -> None:
        path = self.path.partition("?")[0]
        self.log("info", "%s %s %s", self.command, path, code)


def serve(
    source: ConsoleSource, *, allow_actions: bool = False, port: int = 0, pages: tuple[Page, ...] | None = None
) -> tuple[BaseWSGIServer, Settings]:
    """A server bound to 127.0.0.1 (``port`` 0: a free one), and its settings (a fresh token);
    ``serve_forever()`` it, ``shutdown()`` it from another thread."""
    apps: list[Flask] = []
    server = make_server(
        "127.0.0.1", port, lambda environ, start: apps[0](environ, start), threaded=True, request_handler=_Handler
    )
    settings = Settings(allow_actions=allow_actions, port=server.server_port)
    apps.append(create_app(source, settings, pages))
    return server, settings


def url(settings: Settings, host: str = "127.0.0.1") -> str:
    """The URL to open: it holds the token."""
    return f"http://{host}:{settings.port}/?token={settings.token}"


__all__ = ["PAGES", "ConsoleSource", "Page", "Settings", "create_app", "serve", "url"]
