"""The broker: an AMGI app that handles every message entering the ``input`` channel.

Per batch (one shard's records):

1. classify every record with :func:`rdss.validation.validate`;
2. claim each message in the Local Data Repository (messageId for valid messages; the stream
   record itself for invalid ones, whose ids cannot be trusted) - duplicates stop here;
3. send: whole valid messages to their routed channel (replies to their request's
   returnAddress), sequence parts to the ``sequence`` channel keyed by sequence id, invalid
   and error messages, decorated with errorCode/errorDescription, to ``invalid``/``error``
   (whatever optional fields a header carries: a valid message with errorCode and
   errorDescription is routed like any other; consumers put their moves on ``invalid`` and
   ``error`` themselves, keyed ``moved:<group>``, never through here);
4. record in the batch ledger which records' outputs were delivered, then ack them.

Bad input is never nacked: a poison message goes to the invalid or error channel and the
shard moves on. Only infrastructure failures (DynamoDB throttling, undeliverable sends) nack,
and only the records they affect.
"""

from __future__ import annotations

import logging
import time
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from rdss import history
from rdss.amgi.batch import deliver, kinesis_send, receive_batch
from rdss.amgi.types import Receive, Send
from rdss.logs import message_fields
from rdss.observability import Tally, emit_counts, logger, tracer
from rdss.processor import Processor
from rdss.redrive import redriven_record
from rdss.rejection import rejected_key
from rdss.repository.dynamodb import Claim, ClaimOutcome
from rdss.repository.entries import RECEIVED, record_id, record_key
from rdss.validation import Verdict, validate


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


class Broker(Processor):
    """Classifies, de-duplicates and routes the messages of the ``input`` channel."""

    processor = "broker"

    @tracer.capture_method
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        events = await receive_batch(receive)
        started = time.perf_counter()
        now = self.now()
        items = [self._classify(event, now) for event in events]
        tally = Tally()
        ledger = self.ldr.new_ledger()
        self._claim(items, ledger, tally)
        self._plan_outputs(items, now, tally)
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

    # -- 1. classify ---------------------------------------------------------------------------
    def _classify(self, event: dict[str, Any], now: datetime) -> _Item:
        binding = event.get("bindings", {}).get("kinesis", {})
        payload = event.get("payload") or b""
        partition_key = str(binding.get("partition_key") or event["id"])
        # a record `rdss redrive` put back is the parked record it repeats: same claims, same ledger
        original = redriven_record(partition_key)
        record = original or record_id(binding.get("shard_id", ""), event["id"])
        verdict = validate(payload, now=now)
        header = verdict.header or {}
        # an invalid record's messageId cannot be trusted: it is claimed as the record itself
        key = header["messageId"] if verdict.valid else record_key(record)
        if original is not None:  # outputs keyed as producers key them, not by the redrive key
            partition_key = key if verdict.valid else original
        return _Item(event["id"], record, payload, partition_key, verdict, key, header)

    # -- 2. claim ------------------------------------------------------------------------------
    def _claim(self, items: list[_Item], ledger: str, tally: Tally) -> None:
        first: dict[str, _Item] = {}
        claims: dict[str, Claim] = {}
        for item in items:
            if item.key in first:  # the same message twice in one batch
                item.outcome = "duplicate"
                continue
            first[item.key] = item
            claims[item.key] = Claim(item.key, item.record, _claim_attributes(item.verdict))
        self.ldr.claim(list(claims.values()), ledger=ledger)
        for key, claim in claims.items():
            item = first[key]
            if claim.outcome is ClaimOutcome.DUPLICATE:
                item.outcome = "duplicate"
            elif claim.outcome is ClaimOutcome.REDELIVERED and claim.already_sent:
                item.outcome = "redelivered"
            elif claim.outcome is ClaimOutcome.UNAVAILABLE:
                item.failure = "the Local Data Repository is unavailable (throttled or timed out); retry"
        for item in items:
            if item.outcome in ("duplicate", "redelivered"):
                tally.add("outcome", item.outcome)

    # -- 3. plan and deliver -------------------------------------------------------------------
    def _plan_outputs(self, items: list[_Item], now: datetime, tally: Tally) -> None:
        pending = [i for i in items if not i.outcome and i.failure is None]
        replies = [i for i in pending if i.verdict.valid and not i.verdict.is_part and self._is_reply(i)]
        addresses = self._return_addresses(replies)
        is_reply = set(map(id, replies))
        hop = history.hop(self.machine_id, now=now)
        for item in pending:
            verdict = item.verdict
            if not verdict.valid:
                try:
                    rejection = self.rejector.reject(item.payload, verdict, now=now)
                except Exception as error:  # no claim check could be kept: retry rather than drop
                    logger.exception("could not reject a record", extra={"record": item.record})
                    item.failure = f"the rejected record could not be kept ({error}); retry"
                    continue
                item.outcome = rejection.channel
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
                    continue
                address = (addresses or {}).get(header.get("correlationId", ""))
                destination = self.router.destination(header["messageType"], header["messageClass"], address)
                if destination.fallback:
                    tally.add("reply", "default-channel")
                item.outcome = "routed"
                if logger.log_level <= logging.DEBUG:
                    logger.debug(
                        "message routed", extra=message_fields(header, destination.channel, record=item.record)
                    )
                item.outputs.append(
                    kinesis_send(
                        destination.stream, history.append(item.payload, hop, header=header), item.partition_key
                    )
                )
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
