"""Learning: from recorded turns to memories — extraction by a model,
dedup and merge with what is known, confidence, and the write policy's
gate, then persistence with evidence and audit."""
