"""Lint rule missing-zero-grad."""
