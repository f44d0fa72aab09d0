"""The loop that admits queued invocations and hands them to a backend, and the reconciler that
turns backend events into state transitions."""
