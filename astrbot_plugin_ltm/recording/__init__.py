"""Recording: the hooks' only work on AstrBot's hot path — turns and tool
results queued and written as raw events — and explicit "remember that …"
requests, which need no model."""
