"""Lint rule log-one-plus."""
