pytest_plugins = ["elasticityops.devcluster.pytest_plugin", "pytester"]
