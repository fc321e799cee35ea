"""svcgen: manifest-first service toolkit."""
