"""The Jinja2 template of the isolation scenario's report (package
data; a package so that setuptools ships it as such)."""
