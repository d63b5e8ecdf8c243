"""The Tempest plugin entry point (``tempest.test_plugins``)."""

import os

from tempest import config
from tempest.test_discover import plugins

from tempest_plugin import config as rdt_config


class NovaRdtTempestPlugin(plugins.TempestPlugin):
    def load_tests(self):
        base = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
        test_dir = os.path.join(base, "tempest_plugin", "tests")
        return test_dir, base

    def register_opts(self, conf):
        config.register_opt_group(conf, rdt_config.rdt_group,
                                  rdt_config.RdtGroup)

    def get_opt_lists(self):
        return [(rdt_config.rdt_group.name, rdt_config.RdtGroup)]
