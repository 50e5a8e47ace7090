"""Lint rule checkpoint-without-use-reentrant."""
