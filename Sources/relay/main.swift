print("relay: not yet")
