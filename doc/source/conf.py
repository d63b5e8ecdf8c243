project = "nova-rdt"
extensions = ["oslo_config.sphinxext"]
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
