// RelayWebSocket: see DESIGN.md
