"""Lint rule require-grad-typo."""
