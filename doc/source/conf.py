import os
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
# The source tree first: the references below are made from this code,
# not from whatever nova-rdt is installed.
sys.path.insert(0, os.path.dirname(os.path.dirname(HERE)))
sys.path.insert(0, os.path.join(HERE, "_ext"))

project = "nova-rdt"
extensions = ["oslo_config.sphinxext", "nova_rdt_docs"]
master_doc = "index"
exclude_patterns = []
html_theme = "alabaster"
