"""Machine prices: one table (machine_prices.json, each row with its source and date) that the
planner and the gateway both price node-seconds with."""
