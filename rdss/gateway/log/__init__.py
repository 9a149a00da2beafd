"""The gateway's log-based transports: Kinesis and the memory bus, over one base."""
