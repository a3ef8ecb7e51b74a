"""Operating: what operators and users do with stored memory — review and
edits, queries, policy versions and pauses, replay and tuning, the drift
monitor, export and import, background jobs — as validated, audited
operations the engine builds on. They take the database and the config,
never the engine; the doors (doors/) call them through it."""
