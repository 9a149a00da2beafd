"""LocalStack plugins for running the stack's Lambda functions without Docker (installed into
LocalStack's own venv by ``make localstack``; see tests/support/localstack/install.py).

- :mod:`.executor`: the Lambda runtime executor (``LAMBDA_RUNTIME_EXECUTOR=rdss-process``);
- :mod:`.init`: the runtime init each execution environment runs (a process of its own);
- :mod:`.custom_resource`: CloudFormation custom resources (``Custom::*``), which LocalStack
  community accepts without running: their provider functions are invoked as CloudFormation does.

Nothing here is imported by the project itself: these modules run inside LocalStack (Python >=
3.13, LocalStack's packages) and are loaded through :mod:`.plugins`' entry points.
"""
