"""The OAI-PMH protocol as a harvester needs it: Identify and ListRecords pages over HTTP(S),
with 503 ``Retry-After`` honoured and timeouts and 5xx retried with a backoff.

Repositories are read as they behave, not as the protocol says they should: an OAI-PMH error is
taken from the body whatever the HTTP status (some answer ``noRecordsMatch`` or
``badResumptionToken`` with a 400 or a 404), and what a harvester can do without - a
``completeListSize`` or ``cursor`` that is not a number, a ``Retry-After`` that is neither
seconds nor a date - is ignored rather than trusted.

The repository is a partner's server, not ours to trust: each request follows redirects only to
the same scheme and host, reads at most ``max_bytes`` of answer, and ends at ``deadline``
seconds whatever the server does (one that drips a byte every few seconds included) - see
:mod:`rdss.adaptors.oai_pmh.fetch`. A connection refused or a name that does not resolve fails at
once: the next harvest is the retry.
"""

from __future__ import annotations

import contextlib
import email.utils
import logging
import re
import socket
import threading
import time
import urllib.error
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlencode

from rdss.adaptors.oai_pmh.fetch import DEFAULT_DEADLINE, DEFAULT_MAX_BYTES, Answer, Fetcher, Refused, Stopped
from rdss.host.display import shorten
from rdss.model.retry import Backoff

_log = logging.getLogger(__name__)

OAI = "{http://www.openarchives.org/OAI/2.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"

#: Timeouts and 5xx: retried 0.5 s doubling to 30 s (jittered), eight times.
NETWORK_BACKOFF = Backoff(max_retries=8, base=0.25, cap=30.0, jitter=True)
#: The longest wait a ``Retry-After`` gets.
MAX_RETRY_AFTER = 300.0
#: Server errors worth another attempt (503 is the protocol's flow control).
_RETRIED = (500, 502, 503, 504)


class HarvestError(Exception):
    """The repository answered with an OAI-PMH error, or could not be harvested at all."""

    def __init__(self, message: str, code: str = "harvestFailed") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class BadResumptionToken(HarvestError):
    """The server no longer knows the token (tokens expire): harvest again from ``from``."""


def interruptible(stop: threading.Event) -> Callable[[float], None]:
    """A ``sleep`` that a set ``stop`` ends at once, raising :class:`Stopped`: SIGTERM during a
    300 s ``Retry-After`` stops the adaptor within a second, not after the wait."""

    def pause(seconds: float) -> None:
        if stop.wait(max(0.0, seconds)):
            raise Stopped(f"stopped during a {seconds:.1f} s wait")

    return pause


@dataclass(frozen=True)
class Record:
    """One record of a ListRecords answer."""

    identifier: str
    datestamp: str
    deleted: bool = False
    sets: tuple[str, ...] = ()
    #: Dublin Core element (``title``, ``creator``...) -> its values, in document order.
    dc: Mapping[str, tuple[str, ...]] = field(default_factory=dict)


@dataclass(frozen=True)
class Page:
    records: list[Record]
    #: The token for the next page; None on the last one.
    token: str | None = None
    #: The resumption token's ``completeListSize`` and ``cursor``; None when absent or not a number.
    complete_list_size: int | None = None
    cursor: int | None = None
    #: The answer was ``noRecordsMatch``: an empty list (after a resumption token: a list cut short).
    no_records_match: bool = False


# -- the protocol --------------------------------------------------------------------------------
class OaiPmhClient:
    """The two requests a harvester needs, over HTTP(S)."""

    def __init__(
        self,
        base_url: str,
        *,
        timeout: float = 60.0,
        backoff: Backoff = NETWORK_BACKOFF,
        sleep: Callable[[float], None] = time.sleep,
        max_bytes: int = DEFAULT_MAX_BYTES,
        deadline: float = DEFAULT_DEADLINE,
        stop: threading.Event | None = None,
    ) -> None:
        """
        Args:
            timeout: the longest wait for any one read of the connection.
            sleep: how the client waits between attempts (:func:`interruptible` makes a stop
                end the wait, raising :class:`Stopped`).
            stop: when set, a request in progress ends at once, raising :class:`Stopped`
                (without it, a request ends at ``deadline`` at the latest).
            max_bytes: the largest answer read; a larger one fails the request.
            deadline: the most one HTTP request may take, redirects included (its retries each
                have their own).
        """
        self.base_url = base_url
        self.timeout = timeout
        self.backoff = backoff
        self.sleep = sleep
        self.fetcher = Fetcher(base_url, max_bytes=max_bytes, deadline=deadline, timeout=timeout, stop=stop)
        #: HTTP requests made, for tests and logs.
        self.requests = 0

    def identify(self) -> dict[str, str]:
        """Identify: repositoryName, baseURL, earliestDatestamp, granularity, deletedRecord..."""
        root = self._get({"verb": "Identify"})
        identify = root.find(f"{OAI}Identify")
        if identify is None:
            raise HarvestError("no Identify element in the answer", "badAnswer")
        return {child.tag.removeprefix(OAI): (child.text or "").strip() for child in identify}

    def list_records(
        self,
        *,
        metadata_prefix: str = "oai_dc",
        from_: str | None = None,
        set_spec: str | None = None,
        token: str | None = None,
    ) -> Page:
        """One page of ListRecords (the first, or the one ``token`` names).

        Raises:
            BadResumptionToken: the token expired.
            HarvestError: any other OAI-PMH error (``noRecordsMatch`` is an empty page marked
                :attr:`Page.no_records_match`, not one).
        """
        if token is not None:
            params = {"verb": "ListRecords", "resumptionToken": token}
        else:
            params = {"verb": "ListRecords", "metadataPrefix": metadata_prefix}
            if from_:
                params["from"] = from_
            if set_spec:
                params["set"] = set_spec
        try:
            root = self._get(params)
        except HarvestError as error:
            if error.code == "noRecordsMatch":
                return Page([], no_records_match=True)
            raise
        listing = root.find(f"{OAI}ListRecords")
        if listing is None:
            raise HarvestError("no ListRecords element in the answer", "badAnswer")
        records = [_record(element) for element in listing.findall(f"{OAI}record")]
        resumption = listing.find(f"{OAI}resumptionToken")
        following = (resumption.text or "").strip() if resumption is not None else ""
        if resumption is None:
            return Page(records)
        return Page(
            records, following or None, _count(resumption.get("completeListSize")), _count(resumption.get("cursor"))
        )

    def _get(self, params: Mapping[str, str]) -> ET.Element:
        url = f"{self.base_url}?{urlencode(params)}"
        shown = shorten(url, 300)  # a resumption token is the server's to choose, any length
        delays = self.backoff.delays()
        while True:
            self.requests += 1
            try:
                answer = self.fetcher.get(url)
            except Refused as refused:  # a redirect elsewhere, an answer over the cap: not again
                raise HarvestError(f"{shown}: {refused}", refused.code) from None
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                reason = getattr(error, "reason", error)
                if not _transient(reason):
                    raise HarvestError(f"{shown}: {reason}", "unreachable") from None
                delay, why = None, shorten(str(reason), 200)
            else:
                if 200 <= answer.status < 300:
                    return _oai_pmh(answer.body)
                failed = _failure(answer, shown)
                if failed is not None:
                    raise failed
                delay = _retry_after(answer.headers.get("Retry-After")) if answer.status == 503 else None
                why = f"HTTP {answer.status}"
            backoff = next(delays, None)
            if backoff is None:
                raise HarvestError(
                    f"{shown} still failing after {self.backoff.max_retries} retries: {why}", "unreachable"
                )
            wait = delay if delay is not None else backoff
            _log.warning("OAI-PMH request failed (%s); retrying in %.1f s", why, wait)
            self.sleep(wait)


def _oai_pmh(body: bytes) -> ET.Element:
    """The OAI-PMH answer in ``body``.

    Raises:
        BadResumptionToken, HarvestError: the answer is an OAI-PMH error, or not XML.
    """
    try:
        root = ET.fromstring(body)
    except ET.ParseError as error:
        raise HarvestError(f"not XML: {error}", "badXML") from error
    failure = _error(root)
    if failure is not None:
        raise failure
    return root


def _failure(answer: Answer, shown: str) -> HarvestError | None:
    """What a status other than 2xx means: the OAI-PMH error its body carries, or an HTTP
    failure in one line - or None when the request is worth another attempt (503 is flow
    control whatever its body says; a 5xx without an OAI-PMH error may pass)."""
    if answer.status == 503:
        return None
    root = None
    with contextlib.suppress(ET.ParseError):
        root = ET.fromstring(answer.body)
    if root is not None and root.tag == f"{OAI}OAI-PMH":
        error = _error(root)
        if error is not None:
            return error
    if answer.status in _RETRIED:
        return None
    # the reason phrase and the type are the server's to choose (urllib's own reason for a
    # redirect loop spans lines): one line each, cut
    kind = shorten(" ".join(answer.headers.get("Content-Type", "").split()), 60) or "no Content-Type"
    said = f"{len(answer.body):,} bytes of {kind}" if answer.body else "an empty body"
    reason = shorten(" ".join(answer.reason.split()), 160)
    reason = f" {reason}" if reason else ""
    return HarvestError(f"HTTP {answer.status}{reason} from {shown}, not an OAI-PMH error: {said}", "httpError")


def _error(root: ET.Element) -> HarvestError | None:
    """The OAI-PMH error an answer carries (the first, when several), or None."""
    errors = root.findall(f"{OAI}error")
    if not errors:
        return None
    code = shorten(" ".join(errors[0].get("code", "").split()), 60) or "unknown"
    text = shorten(" ".join((errors[0].text or "").split()), 300)
    if len(errors) > 1:
        text += f" (and {len(errors) - 1:,} more error(s))"
    return (BadResumptionToken if code == "badResumptionToken" else HarvestError)(text, code)


def _transient(reason: object) -> bool:
    """A failure worth another attempt: a timeout, a connection dropped mid-answer. Connection
    refused, a name that does not resolve, a certificate refused fail the same way every time."""
    if isinstance(reason, TimeoutError | socket.timeout):
        return True
    if isinstance(reason, ConnectionRefusedError | socket.gaierror | socket.herror):
        return False
    if isinstance(reason, ConnectionError):  # reset or aborted mid-call
        return True
    return isinstance(reason, OSError) and reason.errno is None and "timed out" in str(reason)


def _retry_after(value: str | None) -> float | None:
    """Seconds to wait per a Retry-After header (seconds or an HTTP date), at most
    :data:`MAX_RETRY_AFTER`; None - the backoff's own wait - for anything else."""
    text = (value or "").strip()
    if not text:
        return None
    if _SECONDS.fullmatch(text):
        return min(MAX_RETRY_AFTER, float(text))  # float takes any number of digits (10^400: inf)
    try:
        moment = email.utils.parsedate_to_datetime(text)
        if moment.tzinfo is None:  # "-0000": a time in UTC whose source zone is unknown
            moment = moment.replace(tzinfo=UTC)
        seconds = (moment - datetime.now(UTC)).total_seconds()
    except (TypeError, ValueError, IndexError, OverflowError):  # not a date, or not one datetime holds
        return None
    return max(0.0, min(MAX_RETRY_AFTER, seconds))


def _count(value: str | None) -> int | None:
    """A ``completeListSize`` or ``cursor``: a whole number in ASCII digits, else None (ignored:
    nothing depends on it)."""
    text = (value or "").strip()
    return int(text) if _COUNT.fullmatch(text) else None


#: delay-seconds: ASCII digits (str.isdigit would take "²" and "٣")
_SECONDS = re.compile(r"[0-9]+")
#: up to 18 digits: a count no repository reaches, short of int's limit on digits
_COUNT = re.compile(r"[0-9]{1,18}")


def _record(element: ET.Element) -> Record:
    header = element.find(f"{OAI}header")
    if header is None:
        raise HarvestError("a record without a header", "badAnswer")
    identifier = (header.findtext(f"{OAI}identifier") or "").strip()
    datestamp = (header.findtext(f"{OAI}datestamp") or "").strip()
    sets = tuple((s.text or "").strip() for s in header.findall(f"{OAI}setSpec"))
    deleted = header.get("status") == "deleted"
    dc: dict[str, list[str]] = {}
    metadata = element.find(f"{OAI}metadata")
    if metadata is not None and not deleted:
        for container in metadata:  # oai_dc:dc
            for child in container:
                if child.tag.startswith(DC) and child.text and child.text.strip():
                    dc.setdefault(child.tag.removeprefix(DC), []).append(" ".join(child.text.split()))
    return Record(identifier, datestamp, deleted, sets, {k: tuple(v) for k, v in dc.items()})
