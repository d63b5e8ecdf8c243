"""The Jinja2 templates of the lab's report (package data; a package so
that setuptools ships them as such)."""
