"""Athena SQL (Trino) in, an engine's dialect out: one package per target engine."""
