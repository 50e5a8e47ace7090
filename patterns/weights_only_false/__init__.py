"""Lint rule weights-only-false."""
