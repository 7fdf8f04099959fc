// The core's per-connection and per-member indexes (connections by id, connections
// and participants by uid). A Swift Dictionary stores each
// key next to its value and runs at most 3/4 full, so `[String: Participant]` costs
// 24–48 bytes per entry; the key is already inside the element, so this table stores
// only the reference (8 bytes per slot). Lookups only: nothing ever iterates it, so
// hash order can never reach the output (DESIGN.md, determinism).

/// How a table finds the key inside its element, and hashes it.
public protocol TableKeying {
  associatedtype Element: AnyObject
  associatedtype Key: Hashable
  static func key(of element: Element) -> Key
  /// Defaults to the seeded `hashValue`; keys the relay hands out itself (connection
  /// ids) use `ConnectionID.tableHash`, which costs a multiply instead of a SipHash.
  static func hash(_ key: Key) -> UInt64
}

extension TableKeying {
  @inlinable public static func hash(_ key: Key) -> UInt64 { UInt64(UInt(bitPattern: key.hashValue)) }
}

extension ConnectionID {
  /// Fibonacci hashing (id × 2⁶⁴/φ): ids are numbers the shell assigns, never chosen
  /// by a client, so no one can aim them at one slot.
  @inlinable public var tableHash: UInt64 { raw &* 0x9E37_79B9_7F4A_7C15 }
}

/// Open addressing with linear probing and backward-shift deletion (no tombstones),
/// at most 3/4 full; shrinks after mass removals so memory
/// follows the number of connections back down.
///
/// Used as a multimap (`append`, `elements(withKey:)`), it keeps the elements of one
/// key in insertion order: they share a home slot, a new one lands after the others
/// (a probe run has no holes), deletion shifts them back without reordering, and a
/// resize re-places each run from its start.
/// Inlinable so the server's table (another module) is specialized like the core's:
/// unspecialized, every lookup would go through generic metadata.
public struct RefTable<Keying: TableKeying> {
  public typealias Element = Keying.Element
  public typealias Key = Keying.Key

  @usableFromInline var slots: ContiguousArray<Element?> = []
  @usableFromInline var storedCount = 0
  @inlinable public var count: Int { storedCount }

  @inlinable public init() {}

  @inlinable public var isEmpty: Bool { count == 0 }

  /// Every element, in slot order (callers sort when order matters).
  @inlinable public var values: [Element] { slots.compactMap { $0 } }

  /// Maps the hash onto 0..<capacity by its high bits (multiply-shift), so the
  /// capacity need not be a power of two.
  @inlinable func home(_ key: Key) -> Int {
    Int(Keying.hash(key).multipliedFullWidth(by: UInt64(slots.count)).high)
  }

  @inlinable func after(_ i: Int) -> Int { i + 1 == slots.count ? 0 : i + 1 }

  /// Grows by half: tables then run between 1/2 and 3/4 full instead of a power of
  /// two's 3/8 to 3/4, about an eighth fewer slot bytes on average.
  @inlinable var grown: Int { Swift.max(8, slots.count + slots.count / 2) }

  @inlinable func index(of key: Key) -> Int? {
    guard count > 0 else { return nil }
    var i = home(key)
    while let element = slots[i] {
      if Keying.key(of: element) == key { return i }
      i = after(i)
    }
    return nil
  }

  /// Get: the element with this key. Set: a non-nil value must carry `key`; nil removes.
  @inlinable public subscript(key: Key) -> Element? {
    get { index(of: key).flatMap { slots[$0] } }
    set {
      if let newValue {
        precondition(Keying.key(of: newValue) == key, "element filed under another key")
        insert(newValue)
      } else {
        removeValue(forKey: key)
      }
    }
  }

  /// The element with this key, not retained: for a caller that knows the table
  /// keeps it alive meanwhile (the fan-out loop).
  @inlinable public func unretained(_ key: Key) -> Unmanaged<Element>? {
    guard let i = index(of: key) else { return nil }
    return slots.withUnsafeBufferPointer { Unmanaged.passUnretained($0[i].unsafelyUnwrapped) }
  }

  /// Adds the element, replacing one with the same key.
  @inlinable public mutating func insert(_ element: Element) {
    if let i = index(of: Keying.key(of: element)) {
      slots[i] = element
      return
    }
    if (count + 1) * 4 > slots.count * 3 { resize(to: grown) }
    place(element)
    storedCount += 1
  }

  @inlinable mutating func place(_ element: Element) {
    var i = home(Keying.key(of: element))
    while slots[i] != nil { i = after(i) }
    slots[i] = element
  }

  /// Adds the element even if others have the same key (multimap use).
  mutating func append(_ element: Element) {
    if (count + 1) * 4 > slots.count * 3 { resize(to: grown) }
    place(element)
    storedCount += 1
  }

  /// The elements with this key, in insertion order (multimap use).
  func elements(withKey key: Key) -> [Element] {
    var found: [Element] = []
    guard count > 0 else { return found }
    var i = home(key)
    while let element = slots[i] {
      if Keying.key(of: element) == key { found.append(element) }
      i = after(i)
    }
    return found
  }

  /// Every element, those of each key in insertion order (multimap use): slot order
  /// from just after an empty slot, so that no probe run is seen from its middle
  /// (one that wraps past the end would otherwise be). One pass, no lookups.
  func inRunOrder() -> [Element] {
    guard let empty = slots.firstIndex(where: { $0 == nil }) else { return values }
    var found: [Element] = []
    found.reserveCapacity(count)
    var i = empty
    for _ in 0..<slots.count {
      i = after(i)
      if let element = slots[i] { found.append(element) }
    }
    return found
  }

  /// Whether an element with this key satisfies `predicate` (multimap use).
  func contains(key: Key, where predicate: (Element) -> Bool) -> Bool {
    first(key: key, where: predicate) != nil
  }

  /// The first element, in insertion order, with this key that satisfies `predicate`.
  func first(key: Key, where predicate: (Element) -> Bool) -> Element? {
    guard count > 0 else { return nil }
    var i = home(key)
    while let element = slots[i] {
      if Keying.key(of: element) == key && predicate(element) { return element }
      i = after(i)
    }
    return nil
  }

  /// Removes this very element (multimap use).
  mutating func remove(_ element: Element) {
    guard count > 0 else { return }
    var i = home(Keying.key(of: element))
    while let candidate = slots[i] {
      if candidate === element {
        remove(at: i)
        return
      }
      i = after(i)
    }
  }

  @discardableResult
  @inlinable public mutating func removeValue(forKey key: Key) -> Element? {
    guard let found = index(of: key) else { return nil }
    return remove(at: found)
  }

  @discardableResult
  @inlinable mutating func remove(at found: Int) -> Element? {
    let removed = slots[found]
    slots[found] = nil
    storedCount -= 1
    // Backward shift: pull later members of the probe run into the hole unless their
    // home lies cyclically after the hole (then they are still reachable).
    var hole = found
    var i = after(found)
    while let element = slots[i] {
      let h = home(Keying.key(of: element))
      let reachable = hole <= i ? (hole < h && h <= i) : (hole < h || h <= i)
      if !reachable {
        slots[hole] = element
        slots[i] = nil
        hole = i
      }
      i = after(i)
    }
    if slots.count > 16 && count * 8 < slots.count { resize(to: slots.count / 2) }
    return removed
  }

  @inlinable mutating func resize(to capacity: Int) {
    let old = slots
    slots = ContiguousArray(repeating: nil, count: capacity)
    guard let start = old.firstIndex(where: { $0 == nil }) else { return }
    // From an empty slot on, cyclically: each probe run is re-placed front to back.
    for offset in 0..<old.count {
      if let element = old[(start + offset) % old.count] { place(element) }
    }
  }
}

enum ConnectionsById: TableKeying {
  static func key(of element: Connection) -> ConnectionID { element.id }
  static func hash(_ key: ConnectionID) -> UInt64 { key.tableHash }
}

/// Connections that said hello, by user (a multimap: one user, several devices).
enum ConnectionsByUid: TableKeying {
  static func key(of element: Connection) -> String { element.uid ?? "" }
}

enum ParticipantsByUid: TableKeying {
  static func key(of element: Participant) -> String { element.uid }
}
