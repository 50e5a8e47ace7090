"""Lint rule missing-train-eval-mode."""
