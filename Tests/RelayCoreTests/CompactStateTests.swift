// The compact structures behind the core's memory per member and its
// deadline queue, each against a plain model: resume tokens packed losslessly, the
// reference table as map and as order-keeping multimap, the inline small list, and the
// two deadline lanes firing in one (time, scheduling order) sequence.
import RelayProtocol
import Testing

@testable import RelayCore
import RelayPrimitives

final class Keyed {
  let key: Int
  let serial: Int
  init(key: Int, serial: Int) {
    self.key = key
    self.serial = serial
  }
}

enum KeyedByKey: TableKeying {
  static func key(of element: Keyed) -> Int { element.key }
}

@Suite struct CompactStateTests {
  static let alphabet = Array("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_".utf8)

  @Test func resumeTokensPackLosslessly() {
    var rng = SeededRandom(seed: 6)
    var seen: Set<ResumeToken> = []
    for _ in 0..<2_000 {
      let s = String(decoding: (0..<32).map { _ in Self.alphabet[rng.below(64)] }, as: UTF8.self)
      let token = ResumeToken(s)
      guard case .packed = token else {
        Issue.record("\(s) was not packed")
        return
      }
      #expect(token.string == s)
      #expect(seen.insert(token).inserted)
    }
    let edges = [
      String(repeating: "A", count: 32), String(repeating: "_", count: 32),
      "-" + String(repeating: "z", count: 30) + "0",
    ]
    for s in edges { #expect(ResumeToken(s).string == s) }
    #expect(ResumeToken(String(repeating: "A", count: 32)) != ResumeToken(String(repeating: "A", count: 31) + "B"))
    // Anything else is kept as text: short ids, other lengths, other characters.
    for s in ["", "id1", String(repeating: "a", count: 31), String(repeating: "a", count: 33),
      String(repeating: "a", count: 31) + "=", String(repeating: "a", count: 31) + "+", String(repeating: "é", count: 16)]
    {
      #expect(ResumeToken(s) == .text(s))
      #expect(ResumeToken(s).string == s)
    }
  }

  @Test func refTableMatchesADictionaryAndAnOrderedMultimap() {
    var rng = SeededRandom(seed: 42)
    var table = RefTable<KeyedByKey>()
    var model: [Int: Keyed] = [:]
    var multi = RefTable<KeyedByKey>()
    var multiModel: [Keyed] = []  // insertion order
    for serial in 0..<20_000 {
      // Few keys for the multimap (long runs, wrap-around), many for the map.
      let key = rng.below(serial < 10_000 ? 3_000 : 50)
      switch rng.below(10) {
      case 0..<5:
        let element = Keyed(key: key, serial: serial)
        table.insert(element)
        model[key] = element
        multi.append(element)
        multiModel.append(element)
      case 5..<8:
        #expect(table.removeValue(forKey: key) === model.removeValue(forKey: key))
        if let victim = multiModel.filter({ $0.key == key }).first {
          multi.remove(victim)
          multiModel.removeAll { $0 === victim }
        }
      default:
        let candidates = multiModel.filter { $0.key == key }
        if !candidates.isEmpty {
          let victim = candidates[rng.below(candidates.count)]
          multi.remove(victim)
          multiModel.removeAll { $0 === victim }
        }
      }
      #expect(table[key] === model[key])
      #expect(table.count == model.count)
      #expect(multi.count == multiModel.count)
      let got = multi.elements(withKey: key).map(\.serial)
      let want = multiModel.filter { $0.key == key }.map(\.serial)
      if got != want {
        Issue.record("multimap order for key \(key) at step \(serial): \(got) != \(want)")
        return
      }
    }
    for key in 0..<3_000 {
      #expect(table[key] === model[key])
      #expect(multi.elements(withKey: key).map(\.serial) == multiModel.filter { $0.key == key }.map(\.serial))
    }
  }

  @Test func smallListMatchesAnArray() {
    var rng = SeededRandom(seed: 7)
    var list = SmallList<Int>()
    var model: [Int] = []
    for _ in 0..<5_000 {
      let x = rng.below(6)
      if rng.chance(55) {
        list.append(x)
        model.append(x)
      } else if rng.chance(90) {
        list.removeAll { $0 == x }
        model.removeAll { $0 == x }
      } else {
        list.removeAll()
        model.removeAll()
      }
      #expect(Array(list) == model)
      #expect(list.count == model.count)
      #expect(list.first == model.first)
      #expect(list.contains(x) == model.contains(x))
      switch list {
      case .empty: #expect(model.isEmpty)
      case .one: #expect(model.count == 1)
      case .many: #expect(model.count > 1)
      }
    }
  }

  @Test func allLanesFireInTimeThenSchedulingOrder() {
    var queue = DeadlineQueue()
    var rng = SeededRandom(seed: 3)
    var expected: [(Int64, Int)] = []  // (time, scheduling index)
    var helloTime: Int64 = 0
    for i in 0..<3_000 {
      let time = Int64(rng.below(20)) * 100  // many ties
      switch rng.below(3) {
      case 0:
        queue.schedule(at: time, .liveness(.grace(record: UInt64(i))))
        expected.append((time, i))
      case 1:
        queue.schedule(at: time, .hello(ConnectionID(UInt64(i))))
        expected.append((time, i))
      default:
        // Mostly rising like upgrade times; now and then earlier (goes to the heap).
        helloTime = rng.chance(90) ? helloTime + Int64(rng.below(3)) : Int64(rng.below(1_500))
        queue.scheduleHello(at: helloTime, ConnectionID(UInt64(i)))
        expected.append((helloTime, i))
      }
    }
    #expect(queue.count == 3_000)
    expected.sort { $0.0 != $1.0 ? $0.0 < $1.0 : $0.1 < $1.1 }
    var fired: [(Int64, Int)] = []
    while let d = queue.popDue(1_000) {
      switch d.kind {
      case .hello(let c): fired.append((d.atMonoMs, Int(c.raw)))
      case .liveness(.grace(let record)): fired.append((d.atMonoMs, Int(record)))
      default: Issue.record("unexpected \(d.kind)")
      }
    }
    let due = expected.filter { $0.0 <= 1_000 }
    #expect(fired.map(\.0) == due.map(\.0))
    #expect(fired.map(\.1) == due.map(\.1))
    // A hello earlier than the FIFO's last one goes to the heap and still lands in order.
    queue.scheduleHello(at: 1_050, ConnectionID(9_999))
    let later = expected.map(\.0).filter { $0 > 1_000 }
    #expect(queue.first?.atMonoMs == min(1_050, later.min() ?? 1_050))
    #expect(queue.count == 3_000 - due.count + 1)
    var rest: [Int64] = []
    while let d = queue.popFirst() { rest.append(d.atMonoMs) }
    #expect(rest == rest.sorted())
    #expect(rest.count == 3_000 - due.count + 1)
    #expect(queue.isEmpty)
  }

  /// §8 with production-shaped ids: the packed token resumes, is spent once, and the
  /// new connection's token works in turn.
  @Test func resumeWorksWithPackedTokens() {
    let h = Harness(configure: shortTimings)
    h.ids.long = true
    h.join(1, uid: "a")
    h.join(2, uid: "b")
    _ = h.out()
    let token = h.resumeToken(of: 2)
    #expect(token.utf8.count == 32)
    guard case .packed? = h.core.connections[ConnectionID(2)]!.token else {
      Issue.record("token not packed")
      return
    }
    h.core.closed(ConnectionID(2), clean: false, at: h.now)
    _ = h.out()
    let lines = h.resume(3, uid: "b", token: token, sessions: #"{"s":2}"#)
    let welcome = delivered(to: 3, lines).first ?? ""
    #expect(welcome.contains(#""resumed":true"#))
    #expect(welcome.contains(#""resumeToken":"\#(h.resumeToken(of: 3))""#))
    #expect(h.statuses() == ["a:connected", "b:connected"])
    // Spent: the same token again resumes nothing.
    let again = h.resume(4, uid: "b", token: token, sessions: #"{"s":2}"#)
    #expect(delivered(to: 4, again).first?.contains(#""resumed":false"#) == true)
    // The new one works (its connection is open: 4509 for c3).
    let third = h.resume(5, uid: "b", token: h.resumeToken(of: 3), sessions: #"{"s":2}"#)
    #expect(third.contains("close c3 4509 replaced by a resumed connection"))
  }
}
