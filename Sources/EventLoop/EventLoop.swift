// EventLoop: see DESIGN.md
