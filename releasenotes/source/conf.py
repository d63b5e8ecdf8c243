# nova-rdt release notes: reno's notes under releasenotes/notes, read
# from git by reno.sphinxext (tox -e releasenotes).
project = "nova-rdt Release Notes"
extensions = ["reno.sphinxext"]
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
html_static_path = []
