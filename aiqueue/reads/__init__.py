"""What readers see: stats, monitor rows, live events, usage, metrics, the teacher's page."""
