"""Publishing through :class:`rdss.putrecords.PutRecordsBatcher`: the log transports' ``publish``.

Kinesis and the memory bus both answer ``put_records``, so both publish the same way: 500
records a call, failed entries retried alone after the backoff, GENERR005 logged on giving up,
and one :class:`rdss.gateway.backend.Outcome` per message, in the order given.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from rdss.gateway.backend import Outcome, Outgoing
from rdss.putrecords import PutRecordsBatcher, Record


def publish(batcher: PutRecordsBatcher, address: Callable[[str], str], messages: Sequence[Outgoing]) -> list[Outcome]:
    """Put every message on the stream ``address(message.channel)``; one outcome per message."""
    records = [Record(address(m.channel), m.payload, m.key, token=index) for index, m in enumerate(messages)]
    report = batcher.put(records)
    outcomes: dict[int, Outcome] = {}
    for delivered in report.delivered:
        index = delivered.record.token
        outcomes[index] = Outcome(messages[index], partition=delivered.shard_id, position=delivered.sequence_number)
    for failed in report.failed:
        index = failed.record.token
        outcomes[index] = Outcome(messages[index], failed.error_code, failed.error_message, failed.retries_exhausted)
    return [outcomes.get(index) or Outcome(m, "Unknown", "no outcome reported") for index, m in enumerate(messages)]
