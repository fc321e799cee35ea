"""jinja2 templates of every file svcgen generates; installed as the package data of `svcgen.templates`."""
