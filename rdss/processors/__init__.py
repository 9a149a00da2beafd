"""The processors the stacks deploy: the broker, the sequencer, their shared base, attempts and redrive."""
