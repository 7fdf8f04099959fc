// RelayProtocol: see DESIGN.md
