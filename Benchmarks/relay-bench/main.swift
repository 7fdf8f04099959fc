print("relay-bench: not yet")
