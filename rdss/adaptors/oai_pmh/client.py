"""The OAI-PMH protocol as a harvester needs it: Identify and ListRecords pages over HTTP(S),
with 503 ``Retry-After`` honoured and timeouts and 5xx retried with a backoff.

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
import socket
import time
import urllib.error
import xml.etree.ElementTree as ET
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from urllib.parse import urlencode

from rdss.adaptors.oai_pmh.fetch import DEFAULT_DEADLINE, DEFAULT_MAX_BYTES, Fetcher, Refused
from rdss.display import shorten
from rdss.retry import Backoff

_log = logging.getLogger(__name__)

OAI = "{http://www.openarchives.org/OAI/2.0/}"
DC = "{http://purl.org/dc/elements/1.1/}"

#: Timeouts and 5xx: retried 0.5 s doubling to 30 s (jittered), eight times.
NETWORK_BACKOFF = Backoff(max_retries=8, base=0.25, cap=30.0, jitter=True)


class HarvestError(Exception):
    """The repository answered with an OAI-PMH error, or could not be harvested at all."""

    def __init__(self, message: str, code: str = "harvestFailed") -> None:
        super().__init__(f"{code}: {message}")
        self.code = code


class BadResumptionToken(HarvestError):
    """The server no longer knows the token (tokens expire): harvest again from ``from``."""


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
    complete_list_size: int | None = None


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
    ) -> None:
        """
        Args:
            timeout: the longest wait for any one read of the connection.
            max_bytes: the largest answer read; a larger one fails the request.
            deadline: the most one HTTP request may take, redirects included (its retries each
                have their own).
        """
        self.base_url = base_url
        self.timeout = timeout
        self.backoff = backoff
        self.sleep = sleep
        self.fetcher = Fetcher(base_url, max_bytes=max_bytes, deadline=deadline, timeout=timeout)
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
            HarvestError: any other OAI-PMH error (``noRecordsMatch`` is an empty page, not one).
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
                return Page([])
            raise
        listing = root.find(f"{OAI}ListRecords")
        if listing is None:
            raise HarvestError("no ListRecords element in the answer", "badAnswer")
        records = [_record(element) for element in listing.findall(f"{OAI}record")]
        resumption = listing.find(f"{OAI}resumptionToken")
        following = (resumption.text or "").strip() if resumption is not None else ""
        size = resumption.get("completeListSize") if resumption is not None else None
        return Page(records, following or None, int(size) if size and size.isdigit() else None)

    def _get(self, params: Mapping[str, str]) -> ET.Element:
        url = f"{self.base_url}?{urlencode(params)}"
        shown = shorten(url, 300)  # a resumption token is the server's to choose, any length
        delays = self.backoff.delays()
        while True:
            self.requests += 1
            try:
                body = self.fetcher.get(url)
                break
            except Refused as refused:  # a redirect elsewhere, an answer over the cap: not again
                raise HarvestError(f"{shown}: {refused}", refused.code) from None
            except urllib.error.HTTPError as error:
                if error.code not in (500, 502, 503, 504):
                    raise HarvestError(f"HTTP {error.code} from {shown}", "httpError") from error
                delay = _retry_after(error.headers.get("Retry-After")) if error.code == 503 else None
                why = f"HTTP {error.code}"
            except (urllib.error.URLError, TimeoutError, ConnectionError, OSError) as error:
                reason = getattr(error, "reason", error)
                if not _transient(reason):
                    raise HarvestError(f"{shown}: {reason}", "unreachable") from None
                delay, why = None, shorten(str(reason), 200)
            backoff = next(delays, None)
            if backoff is None:
                raise HarvestError(
                    f"{shown} still failing after {self.backoff.max_retries} retries: {why}", "unreachable"
                )
            wait = delay if delay is not None else backoff
            _log.warning("OAI-PMH request failed (%s); retrying in %.1f s", why, wait)
            self.sleep(wait)
        try:
            root = ET.fromstring(body)
        except ET.ParseError as error:
            raise HarvestError(f"not XML: {error}", "badXML") from error
        found = root.find(f"{OAI}error")
        if found is not None:
            code = found.get("code", "unknown")
            text = (found.text or "").strip()
            raise (BadResumptionToken if code == "badResumptionToken" else HarvestError)(text, code)
        return root


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
    """Seconds to wait per a Retry-After header (seconds or an HTTP date), at most 5 minutes."""
    if not value:
        return None
    if value.strip().isdigit():
        return min(300.0, float(value))
    with contextlib.suppress(TypeError, ValueError):
        moment = email.utils.parsedate_to_datetime(value)
        return max(0.0, min(300.0, (moment - datetime.now(UTC)).total_seconds()))
    return None


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
