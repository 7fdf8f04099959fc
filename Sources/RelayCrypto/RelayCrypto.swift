// RelayCrypto: see DESIGN.md
