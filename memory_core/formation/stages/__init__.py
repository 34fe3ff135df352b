"""The offline stages of formation: segmentation, context assignment, normalisation, NER,
mention linking, relation patterns and mutation classification."""
