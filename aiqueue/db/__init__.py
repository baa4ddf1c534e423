"""The database wing: the only package that imports asyncpg."""
