"""The OAI-PMH Channel Adaptor: a repository's Dublin Core records, published as RDSS messages.

Most institutional repositories cannot take a Message Gateway into their code, but nearly all
of them serve OAI-PMH. The adaptor harvests that endpoint incrementally and publishes through a
gateway:

* a record seen for the first time becomes a **MetadataCreate**; a record seen before, with a
  newer datestamp, a **MetadataUpdate** (a new objectUuid for the new version, and
  ``objectRelatedIdentifier`` *isNewVersionOf* the previous one, as the spec's versioning asks);
  a deleted record (``status="deleted"`` in its header) a **MetadataDelete** of the last version
  published; a deleted record never published is skipped;
* **incremental**: each harvest asks for ``from=`` the largest datestamp the previous one saw
  (``from`` is inclusive, so records stamped exactly then come again and are recognised as
  already published), following ``resumptionToken`` pages to the end;
* **restartable**: after each page is published, the harvest position (the harvest's ``from``,
  the next resumption token, the largest datestamp so far) and the versions published per
  identifier are written to the state file atomically (a temporary file, fsync, rename). A
  restart continues with the saved token, or - when the server no longer knows it
  (``badResumptionToken``) - harvests again from the saved ``from``;
* **finite**: a resumption token that comes back (the list loops) stops the harvest with
  :class:`ResumptionTokenLoop`, the position kept at that token as first saved
  (:mod:`rdss.adaptors.oai_pmh.tokens`), and :data:`MAX_BARREN_PAGES` pages in a row with fresh
  tokens and no record new to the harvest stop it with :class:`ListWithoutEnd`, the position
  that of the last page published; ``noRecordsMatch`` is an empty list, whatever the HTTP
  status it comes with;
* **at least once, without duplicates downstream**: objectUuid and messageId are UUIDv5s of
  (repository, identifier, datestamp), so a page published again after a crash carries the same
  messageIds, which receivers drop as duplicates.

Dublin Core says less than an RDSS research object requires; what it lacks comes from a
:class:`Profile` of the repository (its organisation, default licence and access). A record
whose message still fails the classifier is logged and skipped, never published.

HTTP and XML are the standard library's: ``urllib`` (503 ``Retry-After`` honoured, network
errors retried with a backoff) and ``xml.etree`` (which fetches no external entities).
"""

from __future__ import annotations

from rdss.adaptors.oai_pmh.adaptor import HarvestStats, OaiPmhAdaptor
from rdss.adaptors.oai_pmh.client import (
    DC,
    NETWORK_BACKOFF,
    OAI,
    BadResumptionToken,
    HarvestError,
    OaiPmhClient,
    Page,
    Record,
    interruptible,
)
from rdss.adaptors.oai_pmh.dublin_core import NAMESPACE, Known, Profile, object_uuid, research_object, translate
from rdss.adaptors.oai_pmh.fetch import Stopped
from rdss.adaptors.oai_pmh.state import HarvestState
from rdss.adaptors.oai_pmh.tokens import MAX_BARREN_PAGES, ListWithoutEnd, ResumptionTokenLoop, TokenTrail

__all__ = [
    "DC",
    "MAX_BARREN_PAGES",
    "NAMESPACE",
    "NETWORK_BACKOFF",
    "OAI",
    "BadResumptionToken",
    "HarvestError",
    "HarvestState",
    "HarvestStats",
    "Known",
    "ListWithoutEnd",
    "OaiPmhAdaptor",
    "OaiPmhClient",
    "Page",
    "Profile",
    "Record",
    "ResumptionTokenLoop",
    "Stopped",
    "TokenTrail",
    "interruptible",
    "object_uuid",
    "research_object",
    "translate",
]
