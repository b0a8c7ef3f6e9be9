"""Pattern matchers: one module per kernel family, each mapping kernel IR to a tiling plan.

Installed as ``migrator.patterns``.
"""
