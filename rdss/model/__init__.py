"""The RDSS message model: the spec's error codes, the schemas and the classifier, the builders, sequences,
decoration and history. It imports nothing else of the package: every other part builds on it."""
