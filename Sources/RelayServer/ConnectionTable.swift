import RelayCore

/// Something filed by its connection id (`ServerConnection`; a stand-in in tests).
protocol IdentifiedConnection: AnyObject {
  var id: ConnectionID { get }
}

/// The server's connections by id. Fan-out resolves every recipient through this
/// table, so it is on the hottest path: a Swift `Dictionary` spends about 200
/// instructions per lookup on its seeded SipHash, while ids here are numbers the
/// server hands out itself (never client-chosen, so flooding one bucket is not a
/// concern) and a multiplicative hash spreads them well. Stores only the reference:
/// the id is inside the element.
///
/// Open addressing with linear probing and backward-shift deletion (no tombstones);
/// power-of-two capacity, at most 3/4 full, shrinks after mass closes.
struct ConnectionTable<Element: IdentifiedConnection> {
  private var slots: ContiguousArray<Element?> = ContiguousArray(repeating: nil, count: 16)
  private var shift = 60  // 64 - log2(slots.count)
  private(set) var count = 0

  var isEmpty: Bool { count == 0 }

  /// Fibonacci hashing: the top bits of id × 2⁶⁴/φ.
  private func home(_ raw: UInt64) -> Int { Int(truncatingIfNeeded: (raw &* 0x9E37_79B9_7F4A_7C15) >> UInt64(shift)) }

  private func index(of id: ConnectionID) -> Int? {
    let mask = slots.count - 1
    var i = home(id.raw)
    while let element = slots[i] {
      if element.id == id { return i }
      i = (i + 1) & mask
    }
    return nil
  }

  subscript(id: ConnectionID) -> Element? {
    guard let i = index(of: id) else { return nil }
    return slots[i]
  }

  /// Files `connection` under its id (which must not be present yet).
  mutating func insert(_ connection: Element) {
    precondition(index(of: connection.id) == nil, "connection filed twice")
    if (count + 1) * 4 > slots.count * 3 { resize(to: slots.count * 2) }
    place(connection)
    count += 1
  }

  @discardableResult
  mutating func remove(_ id: ConnectionID) -> Element? {
    guard var hole = index(of: id) else { return nil }
    let removed = slots[hole]
    slots[hole] = nil
    count -= 1
    // Backward shift: pull later members of the probe run into the hole unless
    // their home lies cyclically in (hole, j], so every run stays unbroken.
    let mask = slots.count - 1
    var j = (hole + 1) & mask
    while let element = slots[j] {
      let h = home(element.id.raw)
      let stays = hole <= j ? (hole < h && h <= j) : (hole < h || h <= j)
      if !stays {
        slots[hole] = element
        slots[j] = nil
        hole = j
      }
      j = (j + 1) & mask
    }
    if slots.count > 16 && count * 8 < slots.count { resize(to: slots.count / 2) }
    return removed
  }

  /// Every connection, in no particular order (callers sort when order matters).
  var values: [Element] { slots.compactMap { $0 } }

  private mutating func place(_ connection: Element) {
    let mask = slots.count - 1
    var i = home(connection.id.raw)
    while slots[i] != nil { i = (i + 1) & mask }
    slots[i] = connection
  }

  private mutating func resize(to capacity: Int) {
    let old = slots
    slots = ContiguousArray(repeating: nil, count: capacity)
    shift = 64 - capacity.trailingZeroBitCount
    for case let connection? in old { place(connection) }
  }
}
