"""Engines on the other side of HTTP: one server, replicas of one, or single stages on servers."""
