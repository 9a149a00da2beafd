"""This host: where rdss keeps its state, files opened safely, inputs read with bounds, text a person reads."""
