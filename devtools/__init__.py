"""Development tools: a fake OpenAI-compatible model and helpers to run a
real AstrBot with this plugin (used by the demo and the end-to-end tests)."""
