import setuptools

setuptools.setup(setup_requires=["pbr>=6.0"], pbr=True)
