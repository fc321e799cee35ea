"""The HTTP binding: ASGI app, routing, well-known surfaces, outbound sender."""
