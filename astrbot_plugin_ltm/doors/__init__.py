"""Doors: the ways into the engine — the dashboard API and its replay
routes, the chat commands, the model's tools, the read preview. Each takes
an LTMEngine and turns an outside request into its calls; the only folder
above engine.py, and nothing below imports it (docs/architecture.md#layers)."""
