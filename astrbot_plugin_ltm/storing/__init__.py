"""Storing: SQLite as the one source of truth — the tables, the single
write point and its change channel, migrations, and the rows every derived
index is rebuilt from."""
