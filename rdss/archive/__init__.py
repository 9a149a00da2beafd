"""The archive: the entries every record of ``input``, ``invalid`` and ``error`` is kept as
(:mod:`rdss.archive.entries`, read back by every reader), and the archiver processor that writes
them in batches through Firehose Direct PUT (:mod:`rdss.archive.app`, :mod:`rdss.archive.delivery`)."""
