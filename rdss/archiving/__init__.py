"""The archiver processor: every record of ``input``, ``invalid`` and ``error`` kept as an
archive entry (:mod:`rdss.archive`), written in batches through Firehose Direct PUT."""

from rdss.archiving.app import ArchiverApp
from rdss.archiving.delivery import FirehoseWriter, ObjectStore, Undelivered

__all__ = ["ArchiverApp", "FirehoseWriter", "ObjectStore", "Undelivered"]
