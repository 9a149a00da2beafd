"""The local runtime: the whole system on one machine, with no AWS account and no Docker."""
