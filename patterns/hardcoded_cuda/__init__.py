"""Lint rule hardcoded-cuda."""
