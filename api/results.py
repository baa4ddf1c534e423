"""Vercel function: the teacher's results page and its form handlers."""

from aiqueue.vercel import vercel_app

app = vercel_app(["/results"])
