"""Lint rule torchvision-pretrained."""
