// Per-connection and per-user lists (sessions of a connection, connections of a user)
// hold one element nearly always. An Array would cost a 48-byte heap block for that
// one element on every idle member; this keeps zero or one element inline and only
// falls back to an Array beyond that.

/// An insertion-ordered list stored inline while it has at most one element.
enum SmallList<Element: Equatable>: Sequence {
  case empty
  case one(Element)
  case many([Element])

  init() { self = .empty }

  var count: Int {
    switch self {
    case .empty: return 0
    case .one: return 1
    case .many(let all): return all.count
    }
  }

  var isEmpty: Bool { count == 0 }

  var first: Element? {
    switch self {
    case .empty: return nil
    case .one(let x): return x
    case .many(let all): return all.first
    }
  }

  func contains(_ element: Element) -> Bool {
    switch self {
    case .empty: return false
    case .one(let x): return x == element
    case .many(let all): return all.contains(element)
    }
  }

  mutating func append(_ element: Element) {
    switch self {
    case .empty: self = .one(element)
    case .one(let x): self = .many([x, element])
    case .many(var all):
      self = .empty  // drop the enum's reference so the append does not copy
      all.append(element)
      self = .many(all)
    }
  }

  mutating func removeAll(where shouldRemove: (Element) -> Bool) {
    switch self {
    case .empty: return
    case .one(let x): if shouldRemove(x) { self = .empty }
    case .many(var all):
      self = .empty
      all.removeAll(where: shouldRemove)
      switch all.count {
      case 0: self = .empty
      case 1: self = .one(all[0])
      default: self = .many(all)
      }
    }
  }

  mutating func removeAll() { self = .empty }

  struct Iterator: IteratorProtocol {
    fileprivate var single: Element?
    fileprivate var rest: IndexingIterator<[Element]>?

    mutating func next() -> Element? {
      if let x = single {
        single = nil
        return x
      }
      return rest?.next()
    }
  }

  /// Iterates without allocating (a one-element Array would).
  func makeIterator() -> Iterator {
    switch self {
    case .empty: return Iterator(single: nil, rest: nil)
    case .one(let x): return Iterator(single: x, rest: nil)
    case .many(let all): return Iterator(single: nil, rest: all.makeIterator())
    }
  }
}

/// A snapshot copies a connection's list to write it off the loop (SnapshotParts.swift).
extension SmallList: Sendable where Element: Sendable {}
