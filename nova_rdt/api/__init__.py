"""Nova's API side: checks of the ``rdt:`` flavor extra specs.

* ``flavor_check``: a paste filter checking a whole flavor's ``rdt:`` specs;
* ``validators``: Nova's extra-spec validators, one per ``rdt:`` key.
"""
