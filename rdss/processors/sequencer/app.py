"""The sequencer: an AMGI app holding sequence parts until their sequence is complete.

Parts arrive on the ``sequence`` channel keyed by sequence id, so all parts of a sequence
reach one shard and one invocation at a time, in the order they were put. Each part is
staged in S3 and its position recorded; when the last position arrives the whole message is
reassembled and validated:

* valid: every part goes, in position order, to the channel the whole message routes to;
* invalid: every part goes to the invalid (or error) channel, decorated with the code the
  whole message got.

Consumers therefore never see an incomplete or invalid sequence. Sequences that never
complete are moved to the error channel by :class:`rdss.processors.sequencer.sweep.Sweep`.

Every part ends in exactly one place. The first part to arrive at a position holds it
(:mod:`rdss.model.sequences` says why): the same part again - a redelivery - is dropped and counted
(``duplicate-part``, or ``late-duplicate`` once the sequence is finished), while another part at
that position, or a part whose total is not the sequence's, is moved alone to ``invalid`` with
GENERR004 naming what it conflicts with (``conflict``), before or after the sequence is
released. A part of a sequence already moved to ``error`` by the sweep follows it there. Each
part is read through the classifier first: anything else on ``sequence`` (never the broker's
output) is moved alone with the code it gets.

A part the sequencer fails on (S3 or DynamoDB trouble, or a bug) is nacked with every part after
it on the shard; a failure that is not the infrastructure's counts an attempt, and once they are
used up the part is moved to ``error`` with GENERR009 (:meth:`Processor.failed_attempt`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

import orjson

from rdss.amgi.batch import deliver, kinesis_send, receive_batch
from rdss.amgi.types import Receive, Send
from rdss.deployment.topology import Resolved
from rdss.model import history, timestamps
from rdss.model.errors import ErrorCode
from rdss.observability.fields import message_fields
from rdss.observability.powertools import Tally, emit_counts, logger, tracer
from rdss.processors.base import Processor
from rdss.processors.sequencer.store import COMPLETE, EXPIRED, PENDING, SequenceStore
from rdss.repository.entries import record_id


@dataclass(eq=False)
class _Part:
    """One part of a sequence in the batch at hand."""

    id: str
    payload: bytes
    #: The stream record's identity (``<shard>/<sequence number>``) and partition key.
    record: str = ""
    partition_key: str = ""
    sequence: str = ""
    position: int = 0
    total: int = 0
    failure: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: Set on the part that completed its sequence: the sequence is marked finished once sent.
    completes: frozenset[int] | None = None
    #: Set on a part that followed its finished sequence to ``error``: staged (what its position
    #: held) and recorded once sent, so that a redelivery of it is known as a duplicate.
    follows: bool = False


def _part(event: dict[str, Any]) -> _Part:
    binding = event.get("bindings", {}).get("kinesis", {})
    return _Part(
        event["id"],
        event.get("payload") or b"",
        record=record_id(binding.get("shard_id", ""), event["id"]),
        partition_key=str(binding.get("partition_key") or event["id"]),
    )


class Sequencer(Processor):
    """Holds sequence parts until complete; releases them whole or rejects them together."""

    processor = "sequencer"

    def __init__(self, *, names: Resolved, dynamodb: Any, s3: Any, **options: Any) -> None:
        super().__init__(names=names, dynamodb=dynamodb, s3=s3, **options)
        self.store = SequenceStore(
            dynamodb=dynamodb, s3=s3, table=names.table("sequences"), bucket=names.bucket("staging"), clock=self.clock
        )

    @tracer.capture_method
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        parts = [_part(event) for event in await receive_batch(receive)]
        tally = Tally()
        for index, part in enumerate(parts):
            try:
                self._take(part, tally)
            except Exception as error:  # S3 or DynamoDB trouble, or a bug for this part
                part.outputs = []
                settled = self.failed_attempt(part.record, part.payload, part.partition_key, error)
                if settled.move is not None:  # its attempts are used up: moved (GENERR009)
                    part.outputs = [settled.move]
                    part.completes = None
                    tally.add("outcome", "poison")
                    continue
                # retried from this part: the ones after it on the shard wait (in order)
                part.failure = settled.reason
                for later in parts[index + 1 :]:
                    later.failure = f"held back: record {part.record} before it on the shard failed; retried after it"
                break
        for part, failure in await deliver(scope, send, parts, lambda part: part.outputs):
            part.failure = f"output not delivered ({failure})"
        for part in parts:
            if part.failure is None and part.completes is not None:
                self.store.finish(part.sequence, COMPLETE)
            if part.failure is None and part.follows:
                self._note_follower(part)
            if part.failure is None:
                await send({"type": "message.ack", "id": part.id})
            else:
                tally.add("outcome", "nacked")
                await send({"type": "message.nack", "id": part.id, "message": part.failure})
        emit_counts(self.processor, tally)

    def _take(self, part: _Part, tally: Tally) -> None:
        # with the first part, not at a cold import
        from rdss.model.sequences import conflict, same_part, total_conflict
        from rdss.model.validation import validate

        verdict = validate(part.payload, check_expiry=False, size_limit=None)
        if not verdict.valid or not verdict.is_part or verdict.message is None:
            # never the broker's output: whatever was put on the channel, it is moved with its code
            code = verdict.error_code or ErrorCode.GENERR004
            why = verdict.error_description or "messageHeader.messageSequence: a whole message, not a sequence part"
            self._move_alone(part, verdict.header or {}, code, why, tally, "refused")
            return
        message = verdict.message
        header = message["messageHeader"]
        sequence = header["messageSequence"]
        part.sequence, part.position, part.total = sequence["sequence"], sequence["position"], sequence["total"]
        expiration = header["messageTimings"].get("expirationTimestamp")
        recorded = self.store.record_part(
            part.sequence,
            part.position,
            part.total,
            message_type=header["messageType"],
            message_class=header["messageClass"],
            message_expires_at=timestamps.epoch_microseconds(expiration) / 1e6 if expiration else None,
        )
        progress = recorded.progress
        if progress.total != part.total:  # the first part said otherwise: it alone is moved
            error = total_conflict(part.sequence, progress.total, part.total)
            self._move_alone(part, header, error.error_code, str(error), tally, "conflict")
            return
        if not recorded.new:  # its position was recorded before: this part, or another
            held = self.store.staged(part.sequence, part.position)
            if held is not None:
                first = orjson.loads(held)
                if not same_part(first, message):
                    error = conflict(part.sequence, part.position, first, message)
                    self._move_alone(part, header, error.error_code, str(error), tally, "conflict")
                    return
                if progress.status != PENDING:
                    tally.add("outcome", "late-duplicate")  # released already, or moved already
                    return
                tally.add("outcome", "duplicate-part")  # delivered again: the sequence goes on as before
                if progress.complete:  # its release did not get out last time
                    self._release(part, progress.positions, tally)
                return
            if progress.status == COMPLETE:
                # released before staged parts were kept (or kept past the bucket's expiry): the
                # position was recorded, so this is taken for the part released there
                tally.add("outcome", "late-duplicate")
                return
        if progress.status != PENDING:  # the sequence was moved to the error channel: this part follows
            code = ErrorCode.GENERR003 if progress.status == EXPIRED else ErrorCode.GENERR006
            why = f"part arrived after sequence {part.sequence} was moved to the error channel ({progress.status})"
            self._move_alone(part, header, code, why, tally, "late-part")
            part.follows = True
            return
        self.store.stage(part.sequence, part.position, part.payload)
        tally.add("outcome", "staged")
        if progress.complete:
            self._release(part, progress.positions, tally)

    def _move_alone(
        self, part: _Part, header: dict[str, Any], code: ErrorCode, description: str, tally: Tally, outcome: str
    ) -> None:
        """This part, and not its sequence, moved to the channel of ``code``."""
        rejection = self.rejector.reject(part.payload, code, description)
        part.outputs.append(self.send_to(rejection.channel, rejection.record, part.sequence or part.partition_key))
        logger.warning(
            f"message moved to {rejection.channel}",
            extra=message_fields(header, rejection.channel, errorCode=code, errorDescription=description),
        )
        tally.add("outcome", outcome)
        tally.add("code", str(code))

    def _note_follower(self, part: _Part) -> None:
        """A part that followed its moved sequence is out: stage and record it, so that the same
        part delivered again is a late duplicate. Should that fail, a redelivery is moved again
        (a second copy on ``error``), never lost."""
        try:
            self.store.stage(part.sequence, part.position, part.payload)
            self.store.note_late_part(part.sequence, part.position)
        except Exception:
            logger.exception("could not record a part moved after its sequence", extra={"record": part.record})

    def _release(self, last: _Part, positions: frozenset[int], tally: Tally) -> None:
        """All parts are in: validate the whole and send every part where it belongs."""
        from rdss.model.sequences import SequenceError, join  # with the first complete sequence, not at a cold import
        from rdss.model.validation import validate_message

        staged = self.store.load(last.sequence, positions)
        parts = [orjson.loads(staged[p]) for p in sorted(staged)]
        headers = {p: part["messageHeader"] for p, part in zip(sorted(staged), parts, strict=True)}
        try:
            whole = join(parts)
        except SequenceError as error:
            self._reject(last, staged, error.error_code, f"sequence {last.sequence}: {error}")
            last.completes = positions
            tally.add("outcome", "sequence-invalid")
            return
        verdict = validate_message(whole, now=self.now())
        if not verdict.valid:
            assert verdict.error_code is not None
            description = f"sequence {last.sequence} (whole message): {verdict.error_description}"
            self._reject(last, staged, verdict.error_code, description)
            last.completes = positions
            tally.add("outcome", "sequence-invalid")
            tally.add("code", str(verdict.error_code))
            return
        header = whole["messageHeader"]
        address = None
        if self.router.needs_return_address(header["messageType"], header["messageClass"]):
            request = self.ldr.get([header.get("correlationId", "")]).get(header.get("correlationId", ""))
            address = (request or {}).get("returnAddress")
        destination = self.router.destination(header["messageType"], header["messageClass"], address)
        hop = history.hop(self.machine_id, now=self.now())
        for position in sorted(staged):
            last.outputs.append(
                kinesis_send(
                    destination.stream,
                    history.append(staged[position], hop, header=headers[position]),
                    last.sequence,
                )
            )
        last.completes = positions
        tally.add("outcome", "sequence-complete")
        tally.add("channel", destination.channel)

    def _reject(self, last: _Part, staged: dict[int, bytes], code: ErrorCode, description: str) -> None:
        """Every part of the sequence, rejected with the whole message's code."""
        for position in sorted(staged):
            rejection = self.rejector.reject(staged[position], code, description)
            last.outputs.append(self.send_to(rejection.channel, rejection.record, last.sequence))
            header = orjson.loads(staged[position])["messageHeader"]
            logger.warning(
                f"message moved to {rejection.channel}",
                extra=message_fields(header, rejection.channel, errorCode=code, errorDescription=description),
            )
