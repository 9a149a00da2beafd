"""The local runtime: the whole system on one machine, with no AWS account and no Docker."""

#: The deployment ``rdss local demo --keep`` leaves on this machine: ``rdss local up --env demo``
#: serves it again (named here so that the command line's help needs nothing of the runtime).
KEPT_DEMO_ENVIRONMENT = "demo"
