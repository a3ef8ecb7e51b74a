"""Recalling: what to inject before a model call — search the derived
indexes, load the candidates, rank them and fit the token budget."""
