// RelayServer: see DESIGN.md
