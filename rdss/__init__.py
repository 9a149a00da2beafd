"""RDSS messaging: the Message API 3.0.2 on AWS.

The package holds one model of an RDSS message (schemas, classifier, builders, sequences) and
the processors, gateway and runtime built on it.
"""

__version__ = "0.1.0"

#: Version of the RDSS Message API this implementation speaks (the header's ``version``).
SPEC_VERSION = "3.0.2"

#: Version of the data model behind the message bodies.
DATA_MODEL_VERSION = "3.0.0"

#: The spec's limit on one serialised message, in bytes ("MUST NOT exceed 1000KB").
MAX_MESSAGE_BYTES = 1_000_000

#: The most parts a multi-message sequence may have (``messageSequence.total``; the header
#: schema's maximum). The spec sets no bound, but a sequence is only useful once reassembled,
#: and something must hold all of it at once: the sequencer's function (Lambda gives one at most
#: 10,240 MB), a receiver, ``rdss join``. At 1,000,000 bytes a part, 10,000 parts are 10 GB, as
#: much as the largest function can hold; their positions fit one item of the ``sequences``
#: table (400 KB) many times over. A total beyond it names no sequence that could ever be
#: released: the classifier gives it GENERR004, like a position outside 1..total.
MAX_SEQUENCE_PARTS = 10_000
