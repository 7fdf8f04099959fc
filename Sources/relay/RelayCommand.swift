import ArgumentParser

/// `relay`: the server (`serve`), a token minting helper (`token`) and a health probe (`probe`).
@main
struct RelayCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "relay",
    abstract: "Real-time WebSocket relay for calling apps.",
    subcommands: [Serve.self, Token.self, Probe.self],
    defaultSubcommand: Serve.self)
}
