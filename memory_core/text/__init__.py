"""What text is to memory: words and stems, names, token counts for budgets, and the sentence
encoders (embeddings) every stage shares."""
