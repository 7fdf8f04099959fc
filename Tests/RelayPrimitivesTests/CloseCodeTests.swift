// The reconnect rule after each close code exists in three clients: the Swift client
// machine (through `CloseCode.reconnect`), the bots, and the JavaScript client
// (clients/js, plain JavaScript with its own copy). These tests hold the Swift rule to
// the contract's table (protocol/PROTOCOL.md §14) and the JavaScript copy to the Swift
// rule, so neither can drift.
import Foundation
import RelayPrimitives
import Testing

@Suite struct CloseCodeTests {
  static let root = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
    .deletingLastPathComponent().deletingLastPathComponent()

  /// The rows of §14: codes (a range's ends and middle) and the "Client should" text.
  static func contractRows() throws -> [(codes: [UInt16], clientShould: String)] {
    let text = try String(contentsOf: root.appendingPathComponent("protocol/PROTOCOL.md"), encoding: .utf8)
    guard let start = text.range(of: "## 14. Close codes") else { throw CocoaError(.fileReadCorruptFile) }
    let section = text[start.upperBound...].prefix { $0 != "#" }
    var rows: [(codes: [UInt16], clientShould: String)] = []
    for line in section.split(separator: "\n") where line.hasPrefix("| ") {
      let cells = line.split(separator: "|").map { $0.trimmingSpaces() }
      guard cells.count == 3 else { continue }
      let bounds = cells[0].split(separator: "–").compactMap { UInt16($0) }
      guard let low = bounds.first, let high = bounds.last else { continue }  // the header row
      rows.append(([low, low + (high - low) / 2, high], cells[2].replacingOccurrences(of: "**", with: "")))
    }
    return rows
  }

  @Test func policyFollowsTheContractTable() throws {
    let rows = try Self.contractRows()
    #expect(rows.count >= 12)
    for (codes, clientShould) in rows {
      let expected: CloseCode.Reconnect =
        clientShould.contains("reconnect with resume") ? .resume
        : clientShould.contains("not reconnect") || clientShould.contains("do not retry") ? .stop
        : .unspecified
      for code in codes {
        // 1000 reads "—": whoever closed normally meant it; no client reconnects.
        let want = code == CloseCode.normal ? .stop : expected
        #expect(CloseCode.reconnect(after: code) == want, "\(code): §14 says \"\(clientShould)\"")
      }
    }
    #expect(CloseCode.reconnect(after: nil) == .resume)  // no close frame (1006)
    #expect(CloseCode.reconnect(after: 1006) == .unspecified)
  }

  /// The JavaScript client's `isFinalCloseCode`, evaluated by node for every code,
  /// against `CloseCode.endsReconnecting`.
  @Test(.enabled(if: Self.node != nil)) func javaScriptClientStopsOnTheSameCodes() throws {
    let script = """
      import { isFinalCloseCode } from '\(Self.root.appendingPathComponent("clients/js/relay-client.js").path)';
      const out = [];
      for (let c = 0; c <= 65535; c++) if (isFinalCloseCode(c)) out.push(c);
      console.log(out.join(','));
      """
    let process = Process()
    process.executableURL = URL(fileURLWithPath: Self.node!)
    process.arguments = ["--input-type=module", "-e", script]
    let pipe = Pipe()
    process.standardOutput = pipe
    try process.run()
    let data = pipe.fileHandleForReading.readDataToEndOfFile()
    process.waitUntilExit()
    #expect(process.terminationStatus == 0)
    let javaScript = String(decoding: data, as: UTF8.self).trimmingSpaces()
      .split(separator: ",").compactMap { UInt16($0.trimmingCharacters(in: .whitespacesAndNewlines)) }
    let swift = (UInt16(0)...UInt16.max).filter { CloseCode.endsReconnecting($0) }
    #expect(javaScript == swift)
  }

  static let node: String? = ["/usr/bin/node", "/usr/local/bin/node", "/opt/homebrew/bin/node"]
    .first { FileManager.default.isExecutableFile(atPath: $0) }

  /// RFC 6455 §7.4: what a received close frame may carry.
  @Test func receivedCodeRule() {
    #expect(CloseCode.isValidReceived(1000) && CloseCode.isValidReceived(4999) && CloseCode.isValidReceived(1012))
    #expect(!CloseCode.isValidReceived(1005) && !CloseCode.isValidReceived(1006) && !CloseCode.isValidReceived(5000))
  }
}

@Suite struct SeededRandomTests {
  /// A failing seed must replay exactly: the same seed gives the same stream, and
  /// neighbouring seeds do not give shifted copies of one stream.
  @Test func sameSeedSameStream() {
    var a = SeededRandom(seed: 9)
    var b = SeededRandom(seed: 9)
    var c = SeededRandom(seed: 10)
    let first = (0..<100).map { _ in a.next() }
    #expect(first == (0..<100).map { _ in b.next() })
    let neighbour = (0..<100).map { _ in c.next() }
    #expect(Set(first).isDisjoint(with: neighbour))
    #expect((0..<1_000).allSatisfy { _ in (0..<7).contains(a.below(7)) })
  }
}

@Suite struct TrimTests {
  @Test func trimsOptionalWhitespaceOnly() {
    #expect(" \t a b \t".trimmingSpaces() == "a b")
    #expect("  ".trimmingSpaces() == "")
    #expect("x\n".trimmingSpaces() == "x\n")
  }
}
