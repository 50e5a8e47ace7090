"""Lint rule forward-call."""
