"""A chat turn with memory: the handler every front door shares, the memory turn (decide,
recall, inject, ingest), in-chat commands and the storing of an answered exchange."""
