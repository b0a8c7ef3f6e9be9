"""Jinja2 templates that render NKI kernels from a plan. Installed as ``migrator.templates``."""
