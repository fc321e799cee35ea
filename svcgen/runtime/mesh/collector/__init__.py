"""The collector: ingest of the mesh feeds, the catalog, its queries, its stores and its snapshot."""
