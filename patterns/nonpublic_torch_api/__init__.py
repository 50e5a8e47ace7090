"""Lint rule nonpublic-torch-api."""
