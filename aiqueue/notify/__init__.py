"""Notifications: the outbox's delivery (delivery.py) and the alerts it carries (alerts.py)."""
