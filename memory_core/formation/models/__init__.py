"""Model-backed formation stages: transformers models loaded from a local path
(:mod:`.hf`), LLMs through litellm (:mod:`.llm`, :mod:`.llm_stages`) and the validation of
their structured output (:mod:`.structured`)."""
