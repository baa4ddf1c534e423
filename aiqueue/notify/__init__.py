"""Notifications: the outbox's delivery."""
