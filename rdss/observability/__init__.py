"""Logs, metrics and traces: the fields of a log line, Powertools in Lambda, logging and syslog outside it."""
