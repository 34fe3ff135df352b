"""Reconstruction: what is retrieved becomes the short, cited, delimited memory block:
the statements gathered for it (:mod:`.evidence`), whether it covers the question
(:mod:`.coverage`), stored text made inert (:mod:`.inert`) and the rendering itself
(:mod:`.render`) within the token budget."""
