"""What the broker and the sequencer share: an AMGI batch app over one deployment.

Each is built from the deployment's resolved names: it routes by content (:class:`Router`),
looks requests up in the ``messages`` table (the broker also claims there), moves what it cannot
route through the one reject path - keeping a record too large to travel decorated in the
``errors`` bucket (Claim Check) - and sends to streams by logical channel.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import datetime
from typing import Any, Self

from rdss import history, timestamps
from rdss.amgi.batch import BatchApp, kinesis_send
from rdss.putrecords import MAX_RECORD_DATA
from rdss.rejection import Rejector, S3ClaimChecks
from rdss.repository.dynamodb import LocalDataRepository
from rdss.routing import Router
from rdss.topology import RDSS, Resolved, Topology, from_environment


class Processor(BatchApp):
    """A processor of the topology as an AMGI app (see the module docstring)."""

    #: The topology's name for it (metrics and logs).
    processor: str

    def __init__(
        self,
        *,
        names: Resolved,
        dynamodb: Any,
        s3: Any = None,
        topology: Topology = RDSS,
        clock: Callable[[], float] = time.time,
        now: Callable[[], datetime] = timestamps.now,
    ) -> None:
        """
        Args:
            s3: for claim checks in the errors bucket (without it, a record too large to travel
                decorated is nacked rather than moved).
        """
        self.names = names
        self.ldr = LocalDataRepository(dynamodb, names.table("messages"), clock=clock)
        self.router = Router(names, topology)
        claim_checks = S3ClaimChecks(s3, names.bucket("errors")) if s3 is not None else None
        self.rejector = Rejector(MAX_RECORD_DATA, claim_checks, now=now)
        self.clock = clock
        self.now = now
        #: This processor's machineId in the messageHistory hops it appends.
        self.machine_id = history.processor_id(self.processor, names.environment)

    @classmethod
    def from_environment(cls) -> Self:
        """The processor as the CDK app (or the local runtime) deployed it."""
        from rdss.aws import lazy_client

        # made when first used, not at import: see rdss.aws.LazyClient
        return cls(names=from_environment(), dynamodb=lazy_client("dynamodb"), s3=lazy_client("s3"))

    def send_to(self, channel: str, payload: bytes, partition_key: str) -> dict[str, Any]:
        """A ``message.send`` to the stream of a logical channel."""
        return kinesis_send(self.names.stream(channel), payload, partition_key)
