"""Helpers shared by the test modules: one place, one module per concept."""
