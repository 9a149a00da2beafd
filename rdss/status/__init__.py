"""A deployment's state at a glance: ``rdss status`` (:mod:`rdss.status.snapshot`)."""
