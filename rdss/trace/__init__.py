"""``rdss trace``: where a message went, read from the deployment's sources as one timeline."""
