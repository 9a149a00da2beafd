"""The broker: an AMGI app that handles every message entering the ``input`` channel.

Per batch (one shard's records):

1. classify every record with :func:`rdss.model.validation.validate`;
2. claim each message in the Local Data Repository (messageId for valid messages; the stream
   record itself for invalid ones, whose ids cannot be trusted) - duplicates stop here;
3. send: whole valid messages to their routed channel (replies to their request's
   returnAddress), sequence parts to the ``sequence`` channel keyed by sequence id, invalid
   and error messages, decorated with errorCode/errorDescription, to ``invalid``/``error``
   (judged by content alone: a valid message whose header carries the optional errorCode and
   errorDescription is routed like any other; consumers put their moves on ``invalid`` and
   ``error`` themselves, keyed ``moved:<group>``, never through here); the partition key a
   producer chose decides nothing but the key of the record's outputs (and never reads as a
   consumer's move: :func:`rdss.model.rejection.rejected_key`);
4. record in the batch ledger which records' outputs were delivered, then ack them.

Bad input is never nacked: a poison message goes to the invalid or error channel and the
shard moves on. Only infrastructure failures (DynamoDB throttling, undeliverable sends) nack,
and only the records they affect. Should handling one record raise (a bug: every payload has
a verdict), that record and the ones after it are nacked, so the ones before are checkpointed
and Lambda retries from it; each time counts an attempt for the record, and once they are used
up it is moved to ``error`` with GENERR009 naming the exception and acknowledged, and the
records after it go on (:meth:`rdss.processors.base.Processor.failed_attempt`).
"""

from __future__ import annotations

import functools
import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import TYPE_CHECKING, Any

from rdss.amgi.batch import deliver, kinesis_send, receive_batch
from rdss.amgi.types import Receive, Send
from rdss.model import history
from rdss.model import replay as replays
from rdss.model.conflicts import CONFLICT, DIGEST_ATTRIBUTE, conflicts, message_digest
from rdss.model.errors import ErrorCode
from rdss.observability.fields import message_fields
from rdss.observability.powertools import Tally, emit_counts, logger, tracer
from rdss.processors.attempts import describe
from rdss.processors.base import Processor
from rdss.repository.dynamodb import Claim, ClaimOutcome
from rdss.repository.entries import RECEIVED, record_id, record_key

if TYPE_CHECKING:
    from collections.abc import Callable

    from rdss.model.validation import Verdict


@dataclass(eq=False)  # items are compared by identity: each is one stream record
class _Item:
    """One received record and what the broker decided for it."""

    id: str
    record: str
    payload: bytes
    partition_key: str
    verdict: Verdict
    key: str
    header: dict[str, Any]
    outcome: str = ""
    outputs: list[dict[str, Any]] = field(default_factory=list)
    failure: str | None = None
    #: What handling this record raised, until it is settled (retried, or moved with GENERR009).
    error: BaseException | None = None
    #: Not handled in this delivery: a record before it on the shard failed (nacked, retried).
    held: bool = False
    #: For a valid message: the digest telling a resend from another message under its id.
    digest: str | None = None
    #: The replay an operator granted this record as (claimed once per replay, marked when routed).
    replay: replays.Mark | None = None


class Broker(Processor):
    """Classifies, de-duplicates and routes the messages of the ``input`` channel."""

    processor = "broker"

    @tracer.capture_method
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        events = await receive_batch(receive)
        started = time.perf_counter()
        now = self.now()
        items = [self._classify_guarded(event, now) for event in events]
        tally = Tally()
        self._settle_errors(items, tally)
        self._grant_replays([i for i in items if not i.held and i.failure is None and i.error is None])
        ledger = self.ldr.new_ledger()
        self._claim([i for i in items if not i.held and i.failure is None], ledger, tally)
        self._plan_outputs([i for i in items if not i.held], now, tally)
        self._settle_errors(items, tally)
        for item, failure in await deliver(scope, send, items, lambda item: item.outputs):
            item.failure = f"output not delivered ({failure}); retry"
        sent = [item.record for item in items if item.outputs and item.failure is None]
        try:
            self.ldr.write_ledger(ledger, sent)
        except Exception:  # outputs are out: acknowledge anyway; only a redelivery would repeat them
            logger.exception("could not write the batch ledger", extra={"ledger": ledger, "records": len(sent)})
        for item in items:
            if item.failure is not None:
                tally.add("outcome", "nacked")
                await send({"type": "message.nack", "id": item.id, "message": item.failure})
            else:
                await send({"type": "message.ack", "id": item.id})
        emit_counts(self.processor, tally)
        logger.info(
            "batch handled",
            extra={
                "address": scope.get("address"),
                "records": len(items),
                "counts": {f"{d}:{v}": n for (d, v), n in sorted(tally.items())},
                "milliseconds": round((time.perf_counter() - started) * 1000, 1),
            },
        )

    # -- failures of one record ----------------------------------------------------------------
    def _classify_guarded(self, event: dict[str, Any], now: datetime) -> _Item:
        try:
            return self._classify(event, now)
        except Exception as error:  # a bug for this record: it must not take the batch down
            from rdss.model.validation import Verdict

            binding = event.get("bindings", {}).get("kinesis", {})
            record = record_id(binding.get("shard_id", ""), event["id"])
            payload = event.get("payload") or b""
            key = str(binding.get("partition_key") or event["id"])
            verdict = Verdict(ErrorCode.GENERR009, describe(error), None)
            return _Item(event["id"], record, payload, key, verdict, record_key(record), {}, error=error)

    def _settle_errors(self, items: list[_Item], tally: Tally) -> None:
        """The records whose handling raised, in shard order: each counts an attempt; one whose
        attempts are used up is moved to ``error`` (GENERR009) and the next records go on, the
        first still to be retried is nacked with every record after it."""
        for index, item in enumerate(items):
            if item.error is None or item.held:
                continue
            failure = self.failed_attempt(item.record, item.payload, item.partition_key, item.error)
            item.error = None
            if failure.move is not None:
                item.outputs = [failure.move]
                item.outcome = "error"
                item.failure = None
                tally.add("outcome", "poison")
                tally.add("code", str(ErrorCode.GENERR009))
                continue
            item.outputs = []
            item.failure = failure.reason
            tally.add("outcome", "retried")
            for later in items[index + 1 :]:
                later.held = True
                later.outputs = []
                later.failure = f"held back: record {item.record} before it on the shard failed; retried after it"
            return

    # -- 1. classify ---------------------------------------------------------------------------
    @functools.cached_property
    def _validate(self) -> Callable[..., Verdict]:
        """:func:`rdss.model.validation.validate`: the classifier, loaded by the first batch rather than
        at a cold import."""
        from rdss.model.validation import validate

        return validate

    def _classify(self, event: dict[str, Any], now: datetime) -> _Item:
        binding = event.get("bindings", {}).get("kinesis", {})
        payload = event.get("payload") or b""
        # the key is the producer's to choose and decides nothing here: a record is the one Kinesis
        # names (shard, sequence number), judged by its content alone
        partition_key = str(binding.get("partition_key") or event["id"])
        record = record_id(binding.get("shard_id", ""), event["id"])
        verdict = self._validate(payload, now=now)
        header = verdict.header or {}
        # an invalid record's messageId cannot be trusted: it is claimed as the record itself
        key = header["messageId"] if verdict.valid else record_key(record)
        item = _Item(event["id"], record, payload, partition_key, verdict, key, header)
        if verdict.valid and verdict.message is not None:
            item.digest = message_digest(verdict.message)
        return item

    # -- 2. claim ------------------------------------------------------------------------------
    def _grant_replays(self, items: list[_Item]) -> None:
        """Records that say they are a replay (:mod:`rdss.model.replay`) and that the operator's
        ``rdss replay`` granted - a grant in this table, naming the message's digest - are claimed
        under the replay's own key, not their messageId: routed once more per replay, not dropped
        as duplicates. A replay hop without a grant (a producer's) changes nothing."""
        asking = [
            (i, m) for i in items if i.verdict.valid and not i.verdict.is_part and (m := replays.requested(i.header))
        ]
        if not asking:
            return
        try:
            grants = self.ldr.get([replays.grant_key(m.name, i.key) for i, m in asking])
        except Exception:
            logger.exception("replay grants could not be read")
            for item, _ in asking:
                item.failure = "replay grants could not be read (DynamoDB unavailable); retry"
            return
        for item, mark in asking:
            grant = grants.get(replays.grant_key(mark.name, item.key))
            if grant is not None and grant.get(DIGEST_ATTRIBUTE) == item.digest:
                item.replay = mark
                item.key = replays.claim_key(mark.name, item.key)

    def _claim(self, items: list[_Item], ledger: str, tally: Tally) -> None:
        first: dict[str, _Item] = {}
        repeats: list[_Item] = []  # the same key again in this batch: judged once its claim is known
        claims: dict[str, Claim] = {}
        conflicting: list[tuple[_Item, str]] = []
        for item in items:
            if item.key in first:
                repeats.append(item)
                continue
            first[item.key] = item
            attributes = _claim_attributes(item.verdict)
            if item.digest is not None:
                attributes[DIGEST_ATTRIBUTE] = item.digest
            claims[item.key] = Claim(item.key, item.record, attributes)
        self.ldr.claim(list(claims.values()), ledger=ledger)
        for key, claim in claims.items():
            item = first[key]
            if claim.outcome is ClaimOutcome.DUPLICATE and conflicts(claim.existing, item.digest):
                conflicting.append((item, str((claim.existing or {}).get("claimedBy", "?"))))
            elif claim.outcome is ClaimOutcome.DUPLICATE:
                item.outcome = "duplicate"
                item.outputs = []
            elif claim.outcome is ClaimOutcome.REDELIVERED and claim.already_sent:
                item.outcome = "redelivered"
                item.outputs = []  # a move planned already (GENERR009) went out before
            elif claim.outcome is ClaimOutcome.UNAVAILABLE:
                item.failure = "the Local Data Repository is unavailable (throttled or timed out); retry"
        for item in repeats:
            # the same message twice in one batch - or another message: compared with the message
            # that holds the id, which is the earlier record's only if its claim won (the same
            # resend after a conflicting copy is a duplicate, not a conflict with that copy)
            claim = claims[item.key]
            if claim.outcome is ClaimOutcome.UNAVAILABLE:
                item.failure = "the Local Data Repository is unavailable (throttled or timed out); retry"
                continue
            held = claim.outcome is ClaimOutcome.DUPLICATE
            holder = claim.existing if held else {DIGEST_ATTRIBUTE: first[item.key].digest}
            if conflicts(holder, item.digest):
                holder_record = (claim.existing or {}).get("claimedBy", "?") if held else first[item.key].record
                conflicting.append((item, str(holder_record)))
            else:
                item.outcome = "duplicate"
        if conflicting:
            self._record_conflicts(conflicting, ledger, tally)
        for item in items:
            if item.outcome in ("duplicate", "redelivered"):
                tally.add("outcome", item.outcome)

    def _record_conflicts(self, conflicting: list[tuple[_Item, str]], ledger: str, tally: Tally) -> None:
        """Records reusing a claimed messageId for another message (:mod:`rdss.model.conflicts`):
        each is claimed as its stream record with status CONFLICT naming the record whose id it
        reuses, and moved to ``invalid`` (GENERR004) - never routed as if new, never dropped."""
        from rdss.model.validation import Verdict

        claims = []
        for item, earlier in conflicting:
            message_id = str(item.header.get("messageId"))
            attributes = {
                "status": CONFLICT,
                "bareMessageId": message_id,  # the table's key attribute is messageId
                "conflictsWith": earlier,
                "errorCode": str(ErrorCode.GENERR004),
                DIGEST_ATTRIBUTE: item.digest,
            }
            claims.append(Claim(record_key(item.record), item.record, attributes))
            description = (
                f"messageHeader.messageId: {message_id} was claimed by record {earlier} for a different message "
                "(its messageType, messageClass or messageBody differ); a messageId names one message"
            )
            item.key = record_key(item.record)
            item.verdict = Verdict(
                ErrorCode.GENERR004, description, item.verdict.message, item.verdict.is_part, item.verdict.version
            )
        self.ldr.claim(claims, ledger=ledger)
        for (item, earlier), claim in zip(conflicting, claims, strict=True):
            if claim.outcome is ClaimOutcome.REDELIVERED and claim.already_sent:
                item.outcome = "redelivered"
            elif claim.outcome is ClaimOutcome.UNAVAILABLE:
                item.failure = "the Local Data Repository is unavailable (throttled or timed out); retry"
            else:
                tally.add("outcome", "conflict")
                logger.warning(
                    f"messageId {claim.attributes['bareMessageId']} reused for a different message: record "
                    f"{item.record} conflicts with record {earlier}; moved to invalid (GENERR004)",
                    extra={
                        "messageId": claim.attributes["bareMessageId"],
                        "record": item.record,
                        "conflictsWith": earlier,
                    },
                )

    # -- 3. plan and deliver -------------------------------------------------------------------
    def _plan_outputs(self, items: list[_Item], now: datetime, tally: Tally) -> None:
        pending = [i for i in items if not i.outcome and i.failure is None]
        routed = [i for i in pending if i.verdict.valid and not i.verdict.is_part]
        replies = [i for i in routed if self._is_reply(i)]
        addresses = self._return_addresses(replies)
        is_reply = set(map(id, replies))
        hop = history.hop(self.machine_id, now=now)
        for item in pending:
            try:
                self._plan(item, now, hop, addresses, is_reply, tally)
            except Exception as error:  # a bug for this record: settled by _settle_errors
                item.outputs = []
                item.error = error

    def _plan(
        self,
        item: _Item,
        now: datetime,
        hop: history.Hop,
        addresses: dict[str, str] | None,
        is_reply: set[int],
        tally: Tally,
    ) -> None:
        """Plan one record's outputs."""
        verdict = item.verdict
        if item.error is not None:
            return  # failed already (classifying it): _settle_errors decides
        if not verdict.valid:
            try:
                rejection = self.rejector.reject(item.payload, verdict, now=now)
            except Exception as error:  # no claim check could be kept: retry rather than drop
                logger.exception("could not reject a record", extra={"record": item.record})
                item.failure = f"the rejected record could not be kept ({error}); retry"
                return
            item.outcome = rejection.channel
            from rdss.model.rejection import rejected_key  # loaded with the reject path (Processor.rejector)

            key = rejected_key(item.partition_key, record_key(item.record))
            item.outputs.append(self.send_to(rejection.channel, rejection.record, key))
            tally.add("code", str(rejection.code))
            logger.warning(
                f"message moved to {rejection.channel}",
                extra=message_fields(
                    item.header,
                    rejection.channel,
                    errorCode=rejection.code,
                    errorDescription=rejection.description,
                    record=item.record,
                ),
            )
        elif verdict.is_part:
            header = item.header
            item.outcome = "part"
            payload = history.append(item.payload, hop, header=header)
            item.outputs.append(self.send_to("sequence", payload, header["messageSequence"]["sequence"]))
        else:
            header = item.header
            if id(item) in is_reply and addresses is None:
                item.failure = "return addresses could not be looked up (DynamoDB unavailable); retry"
                return
            address = (addresses or {}).get(header.get("correlationId", ""))
            destination = self.router.destination(header["messageType"], header["messageClass"], address)
            if destination.fallback:
                tally.add("reply", "default-channel")
            item.outcome = "routed"
            if logger.log_level <= logging.DEBUG:
                logger.debug("message routed", extra=message_fields(header, destination.channel, record=item.record))
            payload = history.append(item.payload, hop, header=header)
            if item.replay is not None:  # the last hop: only the broker (granted) or the operator write it
                payload = history.append(payload, history.hop(item.replay.machine_id, now=now))
            item.outputs.append(kinesis_send(destination.stream, payload, item.partition_key))
            tally.add("channel", destination.channel)
        tally.add("outcome", item.outcome)

    def _is_reply(self, item: _Item) -> bool:
        header = item.header
        return self.router.needs_return_address(header["messageType"], header["messageClass"])

    def _return_addresses(self, replies: list[_Item]) -> dict[str, str] | None:
        """correlationId -> the returnAddress its request named (None: the look-up failed)."""
        ids = [i.header.get("correlationId") for i in replies]
        wanted = [i for i in ids if i]
        if not wanted:
            return {}
        try:
            requests = self.ldr.get(wanted)
        except Exception:
            logger.exception("return address look-up failed")
            return None
        return {key: item["returnAddress"] for key, item in requests.items() if item.get("returnAddress")}


def _claim_attributes(verdict: Verdict) -> dict[str, Any]:
    """What the Local Data Repository keeps for a message (the spec's minimum, and more)."""
    header = verdict.header if verdict.valid else None
    if header is None:
        return {"status": RECEIVED, "errorCode": str(verdict.error_code)}
    sequence = header["messageSequence"]
    return {
        "messageClass": header["messageClass"],
        "messageType": header["messageType"],
        "sequence": sequence["sequence"],
        "position": sequence["position"],
        "status": RECEIVED,
        "returnAddress": header.get("returnAddress"),
        "correlationId": header.get("correlationId"),
    }
