"""The tracing run: the child-process harness (bootstrap) and the runner that starts it."""
