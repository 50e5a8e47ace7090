"""Lint rule deprecated-torch-api."""
