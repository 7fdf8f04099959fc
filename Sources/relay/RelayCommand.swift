import ArgumentParser

/// `relay`: the server (`serve`) and a token minting helper (`token`).
@main
struct RelayCommand: ParsableCommand {
  static let configuration = CommandConfiguration(
    commandName: "relay",
    abstract: "Real-time WebSocket relay for calling apps.",
    subcommands: [Serve.self, Token.self],
    defaultSubcommand: Serve.self)
}
