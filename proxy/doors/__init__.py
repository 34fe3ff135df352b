"""Front doors: the wire formats a client may speak (OpenAI chat completions, OpenAI
Responses, Anthropic Messages), each mapped onto the chat handler."""
