"""Vercel function: /webhooks/ai-mark."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/webhooks/ai-mark"])
