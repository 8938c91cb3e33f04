"""Coordinators: consumer groups and committed offsets, producer ids (and later transactions)."""
