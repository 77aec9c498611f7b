"""Notifications: outbox rows fanned out into signed messages, delivered at least once."""
