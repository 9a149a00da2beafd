"""The sequencer: an AMGI app holding sequence parts until their sequence is complete.

Parts arrive on the ``sequence`` channel keyed by sequence id, so all parts of a sequence
reach one shard and one invocation at a time, in the order they were put. Each part is
staged in S3 and its position recorded; when the last position arrives the whole message is
reassembled and validated:

* valid: every part goes, in position order, to the channel the whole message routes to;
* invalid: every part goes to the invalid (or error) channel, decorated with the code the
  whole message got.

Consumers therefore never see an incomplete or invalid sequence. Sequences that never
complete are moved to the error channel by :class:`rdss.sequencer.sweep.Sweep`.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

import orjson

from rdss import history, timestamps
from rdss.amgi.lifespan import acknowledge_lifespan
from rdss.amgi.types import SEND_FLUSH_EXTENSION, Receive, Send, SendFailed
from rdss.broker.routing import Router
from rdss.delivery import MAX_RECORD_DATA
from rdss.errors import ErrorCode
from rdss.ldr import LocalDataRepository
from rdss.logs import message_fields
from rdss.observability import Tally, emit_counts, logger, tracer
from rdss.rejection import Rejector, S3ClaimChecks
from rdss.sequencer.store import COMPLETE, PENDING, SequenceStore
from rdss.sequences import SequenceError, join
from rdss.topology import RDSS, Resolved, Topology, from_environment
from rdss.validation import validate_message


@dataclass(eq=False)
class _Part:
    id: str
    payload: bytes
    sequence: str = ""
    position: int = 0
    total: int = 0
    failure: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    #: Set on the part that completed its sequence: the staged positions to clear once sent.
    completes: frozenset[int] | None = None


class Sequencer:
    processor = "sequencer"

    def __init__(
        self,
        *,
        names: Resolved,
        dynamodb: Any,
        s3: Any,
        topology: Topology = RDSS,
        clock: Callable[[], float] = time.time,
        now: Callable[[], datetime] = timestamps.now,
    ) -> None:
        self.names = names
        self.store = SequenceStore(
            dynamodb=dynamodb, s3=s3, table=names.table("sequences"), bucket=names.bucket("staging"), clock=clock
        )
        self.requests = LocalDataRepository(dynamodb, names.table("messages"), clock=clock)
        self.router = Router(names, topology)
        # parts too large to travel decorated are kept in the errors bucket, as the broker does
        self.rejector = Rejector(MAX_RECORD_DATA, S3ClaimChecks(s3, names.bucket("errors")), now=now)
        self.now = now
        self.machine_id = history.processor_id(self.processor, names.environment)

    @classmethod
    def from_environment(cls) -> Sequencer:
        from rdss.aws import client

        return cls(names=from_environment(), dynamodb=client("dynamodb"), s3=client("s3"))

    async def __call__(self, scope: Any, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await acknowledge_lifespan(receive, send)
        elif scope["type"] == "message":
            await self.handle_batch(scope, receive, send)

    @tracer.capture_method
    async def handle_batch(self, scope: Any, receive: Receive, send: Send) -> None:
        parts: list[_Part] = []
        more = True
        while more:
            event = await receive()
            parts.append(_Part(event["id"], event.get("payload") or b""))
            more = bool(event.get("more_messages", False))
        tally = Tally()
        for part in parts:
            try:
                self._take(part, tally)
            except Exception as error:  # S3 or DynamoDB trouble: this part is retried
                logger.exception("could not stage a part", extra={"sequence": part.sequence})
                part.failure = f"{type(error).__name__}: {error}"
        owner: dict[int, _Part] = {}
        for part in parts:
            for output in part.outputs:
                owner[id(output)] = part
                await send(output)
        if SEND_FLUSH_EXTENSION in scope.get("extensions", {}):
            try:
                await send({"type": SEND_FLUSH_EXTENSION})
            except SendFailed as failure:
                for event in failure.failed:
                    owner[id(event)].failure = f"output not delivered ({failure})"
        for part in parts:
            if part.failure is None and part.completes is not None:
                self.store.finish(part.sequence, COMPLETE, part.completes)
            if part.failure is None:
                await send({"type": "message.ack", "id": part.id})
            else:
                tally.add("outcome", "nacked")
                await send({"type": "message.nack", "id": part.id, "message": part.failure})
        emit_counts(self.processor, tally)

    def _take(self, part: _Part, tally: Tally) -> None:
        message = orjson.loads(part.payload)
        header = message["messageHeader"]
        sequence = header["messageSequence"]
        part.sequence, part.position, part.total = sequence["sequence"], sequence["position"], sequence["total"]
        expiration = header["messageTimings"].get("expirationTimestamp")
        progress = self.store.record_part(
            part.sequence,
            part.position,
            part.total,
            message_type=header["messageType"],
            message_class=header["messageClass"],
            message_expires_at=timestamps.parse(expiration).timestamp() if expiration else None,
        )
        if progress is None or progress.status != PENDING:
            status = progress.status if progress else "unknown"
            if status == COMPLETE or not self.store.note_late_part(part.sequence, part.position):
                tally.add("outcome", "late-duplicate")  # released already, or moved already
                return
            # the sequence was already moved to the error channel: this part joins it there
            rejection = self.rejector.reject(
                part.payload,
                ErrorCode.GENERR003 if status == "EXPIRED" else ErrorCode.GENERR006,
                f"part arrived after sequence {part.sequence} was moved to the error channel ({status})",
            )
            part.outputs.append(self._send(rejection.channel, rejection.record, part.sequence))
            logger.warning(
                f"message moved to {rejection.channel}",
                extra=message_fields(header, rejection.channel, errorCode=rejection.code),
            )
            tally.add("outcome", "late-part")
            return
        self.store.stage(part.sequence, part.position, part.payload)
        tally.add("outcome", "staged")
        if progress.complete:
            self._release(part, progress.positions, tally)

    def _release(self, last: _Part, positions: frozenset[int], tally: Tally) -> None:
        """All parts are in: validate the whole and send every part where it belongs."""
        staged = self.store.load(last.sequence, positions)
        parts = [orjson.loads(staged[p]) for p in sorted(staged)]
        headers = {p: part["messageHeader"] for p, part in zip(sorted(staged), parts, strict=True)}
        try:
            whole = join(parts)
        except SequenceError as error:
            self._reject(last, staged, ErrorCode.GENERR001, f"sequence {last.sequence}: {error}")
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
            request = self.requests.get([header.get("correlationId", "")]).get(header.get("correlationId", ""))
            address = (request or {}).get("returnAddress")
        destination = self.router.destination(header["messageType"], header["messageClass"], address)
        hop = history.hop(self.machine_id, now=self.now())
        for position in sorted(staged):
            last.outputs.append(
                {
                    "type": "message.send",
                    "address": destination.stream,
                    "headers": [],
                    "payload": history.append(staged[position], hop, header=headers[position]),
                    "bindings": {"kinesis": {"partition_key": last.sequence}},
                }
            )
        last.completes = positions
        tally.add("outcome", "sequence-complete")
        tally.add("channel", destination.channel)

    def _reject(self, last: _Part, staged: dict[int, bytes], code: ErrorCode, description: str) -> None:
        """Every part of the sequence, rejected with the whole message's code."""
        for position in sorted(staged):
            rejection = self.rejector.reject(staged[position], code, description)
            last.outputs.append(self._send(rejection.channel, rejection.record, last.sequence))
            header = orjson.loads(staged[position])["messageHeader"]
            logger.warning(
                f"message moved to {rejection.channel}",
                extra=message_fields(header, rejection.channel, errorCode=code, errorDescription=description),
            )

    def _send(self, channel: str, payload: bytes, partition_key: str) -> dict[str, Any]:
        return {
            "type": "message.send",
            "address": self.names.stream(channel),
            "headers": [],
            "payload": payload,
            "bindings": {"kinesis": {"partition_key": partition_key}},
        }
