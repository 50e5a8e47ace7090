"""The tracing run: the child-process harness (harness/, started through bootstrap.py) and the runner that starts it."""
