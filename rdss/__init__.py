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
