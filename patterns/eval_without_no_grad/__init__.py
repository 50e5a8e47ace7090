"""Lint rule eval-without-no-grad."""
