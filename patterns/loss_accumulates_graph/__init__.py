"""Lint rule loss-accumulates-graph."""
