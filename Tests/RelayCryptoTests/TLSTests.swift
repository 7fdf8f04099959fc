// TLS over memory BIOs (TLS.swift): a client and a server connection pumped into
// each other in memory, no sockets. Certificates are made by the `openssl` command
// into a temporary folder (TestSupport), as an operator would make them.
import Foundation
import Testing
import TestSupport

@testable import RelayCrypto

private typealias Pair = TestCertificate

/// Moves bytes both ways until neither side has anything to say.
private func pump(_ a: TLSConnection, _ b: TLSConnection, split: Int = .max, into received: inout [UInt8]) {
  var moved = true
  while moved {
    moved = false
    for (from, to) in [(a, b), (b, a)] {
      let bytes = from.takeOutput()
      guard !bytes.isEmpty else { continue }
      moved = true
      var i = 0
      while i < bytes.count {
        let j = min(bytes.count, i + split)
        Array(bytes[i..<j]).withUnsafeBytes { chunk in
          to.receive(chunk) { if to === b { received.append(contentsOf: $0) } }
        }
        i = j
      }
    }
  }
}

@Suite struct TLSTests {
  @Test(arguments: ["ec", "rsa"])
  func handshakesAndCarriesDataBothWays(kind: String) throws {
    let pair = try Pair.make(kind)
    let server = TLSConnection(context: try TLSContext(certificateChain: pair.cert, privateKey: pair.key))
    let client = TLSConnection(
      context: try TLSContext(clientWithCA: pair.cert), serverName: "localhost", isServer: false)
    var atServer: [UInt8] = []
    pump(client, server, into: &atServer)
    #expect(server.state == .established && client.state == .established)
    #expect(server.alpn == "http/1.1")
    #expect(client.version == "TLSv1.3")
    let request = Array("GET /v1/ws HTTP/1.1\r\n\r\n".utf8)
    request.withUnsafeBytes { _ = client.seal($0) }
    pump(client, server, into: &atServer)
    #expect(atServer == request, "the request differs")
  }

  @Test func recordsSplitByteByByteStillDecrypt() throws {
    let pair = try Pair.make("ec")
    let server = TLSConnection(context: try TLSContext(certificateChain: pair.cert, privateKey: pair.key))
    let client = TLSConnection(
      context: try TLSContext(clientWithCA: pair.cert), serverName: "localhost", isServer: false)
    var atServer: [UInt8] = []
    pump(client, server, split: 1, into: &atServer)
    let big = (0..<50_000).map { UInt8(truncatingIfNeeded: $0 &* 31) }
    big.withUnsafeBytes { _ = client.seal($0) }
    pump(client, server, split: 7, into: &atServer)
    #expect(server.state == .established && client.state == .established)
    #expect(atServer.count == big.count)
    #expect(atServer == big, "the bytes differ")
  }

  @Test func plainHTTPAndGarbageFailWithALabel() throws {
    let pair = try Pair.make("ec")
    let context = try TLSContext(certificateChain: pair.cert, privateKey: pair.key)
    let http = TLSConnection(context: context)
    Array("GET / HTTP/1.1\r\nHost: x\r\n\r\n".utf8).withUnsafeBytes { http.receive($0) { _ in } }
    guard case .failed(let e) = http.state else { Issue.record("plain HTTP accepted: \(http.state)"); return }
    #expect(e.label == "plain_http")
    let garbage = TLSConnection(context: context)
    [UInt8](repeating: 0x16, count: 5).withUnsafeBytes { garbage.receive($0) { _ in } }
    [UInt8](repeating: 0xff, count: 300).withUnsafeBytes { garbage.receive($0) { _ in } }
    guard case .failed = garbage.state else { Issue.record("garbage accepted: \(garbage.state)"); return }
  }

  @Test func untrustedServerIsRefusedByAVerifyingClient() throws {
    let a = try Pair.make("ec")
    let b = try Pair.make("rsa")
    let server = TLSConnection(context: try TLSContext(certificateChain: a.cert, privateKey: a.key))
    let client = TLSConnection(context: try TLSContext(clientWithCA: b.cert), serverName: "localhost", isServer: false)
    var sink: [UInt8] = []
    pump(client, server, into: &sink)
    guard case .failed = client.state else { Issue.record("untrusted certificate accepted"); return }
  }

  @Test func closeNotifyEndsCleanly() throws {
    let pair = try Pair.make("ec")
    let server = TLSConnection(context: try TLSContext(certificateChain: pair.cert, privateKey: pair.key))
    let client = TLSConnection(context: try TLSContext(clientWithCA: pair.cert), serverName: "localhost", isServer: false)
    var sink: [UInt8] = []
    pump(client, server, into: &sink)
    client.close()
    pump(client, server, into: &sink)
    #expect(server.state == .closed)
  }

  @Test func mismatchedOrMissingFilesAreRefused() throws {
    let a = try Pair.make("ec")
    let b = try Pair.make("rsa")
    #expect(throws: TLSError.self) { try TLSContext(certificateChain: a.cert, privateKey: b.key) }
    #expect(throws: TLSError.self) { try TLSContext(certificateChain: "/nonexistent.pem", privateKey: a.key) }
    do {
      _ = try TLSContext(certificateChain: a.cert, privateKey: b.key)
    } catch {
      #expect(error.label == "key_mismatch" || error.label == "private_key")
    }
  }
}
