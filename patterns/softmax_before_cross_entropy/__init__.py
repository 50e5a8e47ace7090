"""Lint rule softmax-before-cross-entropy."""
