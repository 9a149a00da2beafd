"""The analysts' side: the Glue jobs on a deployment's archives, run on this machine
(:mod:`rdss.analytics.jobs`), and the Athena named queries the CDK app declares
(:mod:`rdss.analytics.queries`)."""
