"""Lint rule exp-minus-one."""
