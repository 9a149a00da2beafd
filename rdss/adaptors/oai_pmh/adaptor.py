"""The adaptor: harvest pages incrementally, translate, classify, publish, save the position."""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import asdict, dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

from rdss.adaptors.oai_pmh.client import BadResumptionToken, OaiPmhClient, Page, Record
from rdss.adaptors.oai_pmh.dublin_core import MAX_JISC_ID, Known, Profile, moment, readable, translate
from rdss.adaptors.oai_pmh.fetch import Stopped
from rdss.adaptors.oai_pmh.state import HarvestState
from rdss.adaptors.oai_pmh.tokens import MAX_BARREN_PAGES, Novelty, ResumptionTokenLoop, TokenTrail
from rdss.host.display import shorten
from rdss.model import canonical, messages, timestamps, translation
from rdss.model.messages import Message
from rdss.model.schemas import V3, V4
from rdss.model.validation import validate

_log = logging.getLogger(__name__)

DEFAULT_PROFILE = Profile()


@dataclass
class HarvestStats:
    """What one harvest did."""

    pages: int = 0
    records: int = 0
    created: int = 0
    updated: int = 0
    deleted: int = 0
    #: Records already published in this version, or deletions of records never published.
    unchanged: int = 0
    #: Records whose message failed the classifier (logged, not published).
    invalid: int = 0
    #: True when the harvest reached its last page.
    complete: bool = False

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


class OaiPmhAdaptor:
    """Harvests one OAI-PMH endpoint into one channel (see the module docstring)."""

    def __init__(
        self,
        client: OaiPmhClient,
        publish: Callable[[list[Message]], object],
        state_file: str | Path,
        *,
        profile: Profile = DEFAULT_PROFILE,
        metadata_prefix: str = "oai_dc",
        set_spec: str | None = None,
        start_from: str | None = None,
        now: Callable[[], datetime] = timestamps.now,
        version: str = V3.version,
        tenant_jisc_id: int | None = None,
        max_barren_pages: int = MAX_BARREN_PAGES,
    ) -> None:
        """
        Args:
            publish: sends a page's messages and returns once the channel has them (e.g.
                ``lambda m: gateway.send_all(m, channel="input")``); raising leaves the page to
                be harvested again.
            start_from: ``from`` of the first harvest when the state file has none.
            max_barren_pages: how many pages in a row, each with a resumption token, may list
                no record new to the harvest before it stops (:class:`ListWithoutEnd`).
            version: the Message API version the messages are written in (``3.0.2`` or
                ``4.0.0``); 4.0.0 wants ``tenant_jisc_id``, the deployment's tenant.

        Raises:
            ValueError: a version not written here, 4.0.0 without a tenant, a tenant that is
                not a Jisc ID (0..2^63-1).
        """
        if version not in canonical.VERSIONS:
            raise ValueError(f"version: expected one of {', '.join(canonical.VERSIONS)}, found {version!r}")
        if version == V4.version and tenant_jisc_id is None:
            raise ValueError("4.0.0 messages carry a tenantJiscID: give the deployment's tenant_jisc_id")
        if tenant_jisc_id is not None and (type(tenant_jisc_id) is not int or not 0 <= tenant_jisc_id <= MAX_JISC_ID):
            raise ValueError(f"tenant_jisc_id: expected a Jisc ID, a whole number 0..2^63-1, found {tenant_jisc_id!r}")
        self.version = version
        self.max_barren_pages = max_barren_pages
        self.tenant_jisc_id = tenant_jisc_id
        self.client = client
        self.publish = publish
        self.state_file = Path(state_file)
        self.profile = profile
        self.now = now
        self.state = HarvestState.load(self.state_file, client.base_url, metadata_prefix, set_spec)
        if self.state.from_ is None and self.state.token is None and start_from:
            self.state.from_ = start_from

    def harvest(self, stop: threading.Event | None = None) -> HarvestStats:
        """One incremental harvest, page by page, each page published then saved.

        Raises:
            ResumptionTokenLoop: a resumption token came back (the list loops); the pages listed
                are published, and the position is the one saved with that token when it was
                first handed out, where the next harvest resumes (and stops likewise).
            ListWithoutEnd: ``max_barren_pages`` pages in a row with a fresh token listed no
                record new to the harvest; the position is that of the last page published.
            HarvestError: the repository failed (after retries); the position is that of the
                last page published.
            Exception: whatever ``publish`` raised; that page is harvested again next time.

        A :class:`~rdss.adaptors.oai_pmh.fetch.Stopped` raised by a wait (the client's, or one in
        ``publish``) ends the harvest as ``stop`` does between pages, the page in hand unsaved.
        """
        stop = stop or threading.Event()
        stats = HarvestStats()
        try:
            self._harvest(stop, stats)
        except Stopped as stopped:  # the page in hand is not saved: the next harvest asks for it again
            _log.info("harvest stopped: %s", stopped)
            stats.complete = False
        return stats

    def _harvest(self, stop: threading.Event, stats: HarvestStats) -> None:
        state = self.state
        trail = TokenTrail()
        novelty = Novelty(self.max_barren_pages)
        if state.token is not None:
            try:
                page = self.client.list_records(token=state.token)
            except BadResumptionToken:
                _log.warning(
                    "the saved resumption token expired: harvesting again from %s",
                    shorten(state.from_ or "the start", 40),
                )
                state.token = None
                page = self._first_page()
            else:
                trail.resumed_with(state.token, state.high_water)
        else:
            page = self._first_page()
        while True:
            if page.token is not None:  # the last page ends the list whatever it holds
                novelty.listed(((r.identifier, r.datestamp) for r in page.records), stats.pages + 1)
            self._publish_page(page, stats)
            if page.no_records_match and state.token is not None:
                # noRecordsMatch to a resumption token: the list was cut short (a server that
                # says so of an expired token, say). What it did not list may be older than
                # what it did, so the next harvest starts from the same ``from``, not past it.
                _log.warning(
                    "the repository answered noRecordsMatch to a resumption token: the next harvest "
                    "starts again from %s",
                    shorten(state.from_ or "the start", 40),
                )
                state.high_water = None
            if page.token is not None:
                first = trail.seen(page.token)
                if first is not None:
                    state.token, state.high_water = page.token, first.high_water
                    state.save(self.state_file)
                    raise ResumptionTokenLoop(page.token, first.page, trail.pages + 1)
                trail.handed_out(page.token, state.high_water)
            state.token = page.token
            if page.token is None:
                state.from_ = state.high_water or state.from_
                state.high_water = None
                state.harvests += 1
                stats.complete = True
            state.save(self.state_file)
            if page.token is None or stop.is_set():
                return
            page = self.client.list_records(token=page.token)

    def _first_page(self) -> Page:
        return self.client.list_records(
            metadata_prefix=self.state.metadata_prefix, from_=self.state.from_, set_spec=self.state.set_spec
        )

    def _publish_page(self, page: Page, stats: HarvestStats) -> None:
        state = self.state
        stats.pages += 1
        now = self.now()
        outgoing: list[Message] = []
        published: dict[str, Known] = {}
        high_water = state.high_water
        for record in page.records:
            stats.records += 1
            if not readable(record.datestamp):
                # no moment to order it by (year 0000, a zone past 9999, not a date): neither
                # published nor allowed to move the next harvest's ``from``
                self._not_published(
                    record, stats, "badDatestamp", "not an OAI-PMH datestamp in the years 0001..9999 (UTC)"
                )
                continue
            if high_water is None or moment(record.datestamp) > moment(high_water):
                high_water = record.datestamp
            known = published.get(record.identifier) or state.objects.get(record.identifier)
            message = translate(record, known, base_url=state.base_url, profile=self.profile, now=now)
            if message is None:
                stats.unchanged += 1
                continue
            object_uuid = message["messageBody"]["objectUuid"]
            try:
                outgoing_message = self._in_version(message)
            except translation.Untranslatable as error:  # no form in the version written: not published
                self._not_published(record, stats, str(error.code), error.description)
                continue
            # no size stage: the gateway sends a message over 1 MB as a multi-message sequence
            verdict = validate(messages.serialise(outgoing_message), size_limit=None)
            if not verdict.valid:
                self._not_published(record, stats, str(verdict.error_code), verdict.error_description or "")
                continue
            outgoing.append(outgoing_message)
            message_type = message["messageHeader"]["messageType"]
            if message_type == "MetadataDelete":
                assert known is not None
                published[record.identifier] = Known(known.object_uuid, record.datestamp, deleted=True)
                stats.deleted += 1
            else:
                published[record.identifier] = Known(object_uuid, record.datestamp)
                stats.created += message_type == "MetadataCreate"
                stats.updated += message_type == "MetadataUpdate"
        if outgoing:
            self.publish(outgoing)
        state.objects.update(published)
        state.high_water = high_water

    @staticmethod
    def _not_published(record: Record, stats: HarvestStats, code: str, description: str) -> None:
        stats.invalid += 1
        _log.error(
            "record %s (%s) not published: %s %s",
            shorten(record.identifier, 200),  # the repository's to choose, any length
            shorten(record.datestamp, 40),
            code,
            shorten(description, 300),
        )

    def _in_version(self, message: Message) -> Message:
        """The record's message as the adaptor publishes it: Dublin Core maps onto 3.0.2's
        research object, and 4.0.0's is written from it through the canonical model (the
        mappings docs/vendors.md "Versions" lists), as this adaptor's own message - no
        translation hop, since nothing else wrote it first."""
        if self.version == V3.version:
            return message
        return translation.translate_message(
            translation.read(messages.serialise(message)), self.version, tenant_jisc_id=self.tenant_jisc_id
        )
