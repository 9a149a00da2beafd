#!/usr/bin/env python3
"""The CDK app: ``cdk synth|deploy -c env=<dev|staging|prod>`` (settings: cdk.json, context ``rdss``)."""

import aws_cdk as cdk

from stacks.app import build

app = cdk.App()
build(app)
app.synth()
