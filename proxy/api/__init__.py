"""The proxy's own endpoints: the route table, health and models, the ``/memory`` API,
memory's history, receipts, the OpenAPI document and the inspector page."""
