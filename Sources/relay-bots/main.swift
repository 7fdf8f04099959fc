print("relay-bots: not yet")
