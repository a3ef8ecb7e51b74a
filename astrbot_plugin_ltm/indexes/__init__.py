"""Indexes derived from SQLite: the reader's keyword (BM25) and vector
(FAISS) namespaces, one per scope and corpus, kept in step with every
committed write through the change channel (storing.changes)."""
