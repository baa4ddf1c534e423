"""The doctor: its checks, their wording."""
