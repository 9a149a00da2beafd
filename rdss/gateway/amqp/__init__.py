"""The RabbitMQ backend (``amqp://``, ``amqps://``), with the conventions of Mosaic's message bus.

URL: ``amqp://user:password@host:port/vhost?<options>``; besides pika's own query parameters
(``heartbeat``, ``connection_attempts``, ``socket_timeout``...) - parsed in
:mod:`~rdss.gateway.amqp.options`:

* ``namespace=`` prefixes every exchange and queue name (``<namespace>.commands``); default none.
* ``retry=10s:3,30s:3`` the delay tiers: a message its handler refused waits 10 s before each
  of its first 3 retries, then 30 s before each of the next 3; after that it is dead-lettered.
  Units ``ms``, ``s``, ``m``; ``retry=none`` dead-letters at the first refusal.
* ``queue_type=quorum`` (default) declares the consumer groups' queues as quorum queues, whose
  delivery count RabbitMQ keeps for every consumer on every host; ``queue_type=classic`` keeps
  classic queues (for deployments whose queues already exist as classic ones: a queue cannot
  change its type) with the count in a per-host SQLite file (:mod:`rdss.gateway.amqp.redeliveries`).
  Moving over: ``docs/rabbitmq.md``.
* ``redeliveries=5`` how many times a message may be redelivered after its consumer died
  holding it before it is dead-lettered (counted by RabbitMQ on quorum queues).
* ``envelope=mosaic`` (default) sends messages as Mosaic envelopes (:mod:`rdss.gateway.amqp.mosaic`);
  ``envelope=rdss`` sends the RDSS JSON as it is. Consumers read either.
* ``state=PATH`` the SQLite file holding the Local Data Repository (and, for classic queues, the
  redelivery counts)
  (default ``$XDG_STATE_HOME/rdss/amqp-<host>-<port>-<vhost>.sqlite``).
* ``ldr=`` the Local Data Repository elsewhere: ``dynamodb://TABLE`` or ``sqlite:///path``
  (:mod:`rdss.repository.stores`); default: the ``state=`` file.
* ``prefetch=200`` unacknowledged messages a consumer may hold.

Topology (names shown without a namespace; everything durable, messages persistent):

* ``commands`` and ``events``: topic exchanges, for RDSS Commands and for Events and Documents;
  routing key ``<channel>.<entity>.<messageType>``.
* ``<group>.<channel>.<messageType>``: a queue per consumer group, channel and messageType,
  bound to ``commands`` and/or ``events`` with that routing key; a quorum queue with
  ``x-delivery-limit`` (the backstop) and ``x-dead-letter-exchange=dead_letter`` (at-least-once
  dead-lettering).
* ``retry.10s``, ``retry.30s``: a delay tier each, a fanout exchange into a queue of the same
  name with ``x-message-ttl`` and ``x-dead-letter-exchange=""``: when the TTL expires the
  message goes back to the queue it came from (it was published with that queue's name as its
  routing key).
* ``dead_letter``: a fanout exchange into the ``dead_letter`` queue - retries exhausted or too
  many redeliveries; the body untouched, the reason in the headers.
* ``invalid`` and ``error``: fanout exchanges into queues of the same names, the spec's Invalid
  and Error Message Queues (decorated messages).

Routing keys follow Mosaic's ``consumer.entity.command`` / ``producer.entity.event``: the
*entity* is ``metadata`` or ``vocabulary`` (from the messageType), the last word the
messageType, and the first word the RDSS channel's address. For a Command that is Mosaic's
consumer (a return address names who acts on it); for Events and Documents Mosaic names the
producer, but RDSS producers publish onto shared Data Type Channels rather than owning them, so
the channel is the owner and the producing application travels in the ``app_id`` property and
the envelope. This keeps the gateway's contract on every backend: a consumer of channel C sees
what was sent to C, and only that. As in Mosaic, *consumers own their queues*: a group's queues
exist from its first subscription (:meth:`AmqpTransport.declare` creates them ahead), and a
message no queue is bound for is refused (``NO_ROUTE``, the publish is mandatory) rather than
silently dropped.

Consuming: every queue of the group is a partition, consumed with manual acks. Before a
delivery is handed over, the consumer has the part the broker function plays on Kinesis played
(:class:`rdss.gateway.inline_broker.InlineBroker`): an invalid message is moved, decorated, to
``invalid`` or ``error`` (acknowledging it - never
redelivered in a loop). A message whose consumer died holding it comes back with RabbitMQ's
``x-delivery-count`` one higher, whichever host's consumer took it, and past ``redeliveries``
it is dead-lettered unhandled (RabbitMQ's own ``x-delivery-limit``, 20 higher, is the backstop
for a consumer that dies before it can look). A consumer that knows held messages come back
through no fault of theirs (its connection dropped, or it closed) forgives them: in memory on
quorum queues, in the per-host file on classic ones. :meth:`AmqpConsumer.redeliver` sends a refused message through the
delay tiers, then to ``dead_letter``. A delivery's ``attempts`` attribute - its failed
attempts so far - is the refusals carried in ``x-rdss-attempts`` plus the deaths counted since,
so ``Gateway.listen(max_attempts=N)`` moves a poison message to ``error`` (GENERR009) after N
failed attempts of either kind, as on the other backends.

The modules: :mod:`~rdss.gateway.amqp.options` (the URL), :mod:`~rdss.gateway.amqp.naming`
(exchanges, queues, routing keys), :mod:`~rdss.gateway.amqp.publisher` (confirms),
:mod:`~rdss.gateway.amqp.transport`, :mod:`~rdss.gateway.amqp.consumer`,
:mod:`~rdss.gateway.amqp.redeliveries` (the classic queues' counter),
:mod:`~rdss.gateway.amqp.mosaic` (the envelope: a send's ``auth_token`` and ``context`` travel
in it, its ``timestamp`` in UTC).

Publishing uses publisher confirms with many messages in flight (a pika ``SelectConnection``
driven from the calling thread: one confirm per message in a blocking channel costs an fsync
each). A lost connection, a nack or a confirm timeout is retried with the gateway's backoff;
``NO_ROUTE`` is not.
"""

from __future__ import annotations

import logging

from rdss.aws.clients import client as aws_client
from rdss.gateway.amqp.consumer import AmqpConsumer
from rdss.gateway.amqp.naming import QUEUE_CHANNELS, Names, entity, routing_key
from rdss.gateway.amqp.options import Options, Tier, parse_tiers
from rdss.gateway.amqp.publisher import ConfirmingPublisher
from rdss.gateway.amqp.transport import AmqpTransport
from rdss.gateway.backend import Backend, Settings, local_data_repository
from rdss.gateway.url import GatewayURL
from rdss.repository.sqlite import SqliteRepository

# pika logs every refused connection at ERROR with a traceback before raising; this backend turns
# those into TransportError and its own warnings, so without a handler of the application's they
# must not reach Python's last-resort handler (stderr)
logging.getLogger("pika").addHandler(logging.NullHandler())


def open_backend(url: GatewayURL, settings: Settings) -> Backend:
    """The backend for ``amqp://user:password@host:port/vhost?namespace=&retry=&queue_type=&redeliveries=&envelope=&state=``.

    Raises:
        URLError: an option is malformed.
        TransportError: the broker cannot be reached.
    """
    options = Options.from_url(url)
    transport = AmqpTransport(options, settings)
    repository = local_data_repository(
        url,
        settings,
        lambda: SqliteRepository(options.state, settings.application),
        dynamodb=lambda: aws_client("dynamodb"),
    )
    return Backend(transport, repository)


__all__ = [
    "QUEUE_CHANNELS",
    "AmqpConsumer",
    "AmqpTransport",
    "ConfirmingPublisher",
    "Names",
    "Options",
    "SqliteRepository",
    "Tier",
    "entity",
    "open_backend",
    "parse_tiers",
    "routing_key",
]
