"""Operating: what operators and users do with stored memory — the chat
commands, the dashboard API behind the review page, review and edits,
export and import — all through one set of validated, audited operations."""
