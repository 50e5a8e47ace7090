"""Lint rule optimizer-before-to-device."""
