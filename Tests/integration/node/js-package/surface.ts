// The hand-written relay-client.d.ts against the code: `gen/` holds the declarations
// tsc derives from relay-client.js itself (--allowJs --declaration). Each constant
// below only type-checks when both agree on the exported names, the public members
// of each class and the arity of each method.
import type * as Code from './gen/relay-client.js';
import type * as Types from 'relay-client';

type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
type Own<T> = Exclude<keyof T, keyof EventTarget>;
// An `any` (what tsc infers for an untyped getter) is not a method.
type Arity<F> = 0 extends 1 & F ? 'not a method' : F extends (...args: infer P) => unknown ? Required<P>['length'] : 'not a method';
type Arities<T> = { [K in Own<T>]: Arity<T[K]> };

export const sameExports: Same<keyof typeof Code, keyof typeof Types> = true;
export const sameClientMembers: Same<Own<Code.RelayClient>, Own<Types.RelayClient>> = true;
export const sameClientArities: Same<Arities<Code.RelayClient>, Arities<Types.RelayClient>> = true;
export const sameErrorMembers: Same<keyof Code.RelayError, keyof Types.RelayError> = true;
export const sameEventMembers: Same<keyof Code.RelayEvent, keyof Types.RelayEvent> = true;
export const sameFunctionArities: Same<
  [Arity<typeof Code.backoffDelay>, Arity<typeof Code.isFinalCloseCode>],
  [Arity<typeof Types.backoffDelay>, Arity<typeof Types.isFinalCloseCode>]
> = true;
