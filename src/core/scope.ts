// Tensor scopes (TensorFlow.js's tidy): every tensor created while fn runs is disposed when it returns, except
// the tensors it returns (alone, or inside arrays and plain objects) and those marked with keep(). Model code can
// then read like the math, with no hand-written bookkeeping of intermediates. Scopes nest: what an inner scope
// returns belongs to the outer one.
import type { Tensor } from './tensor.js';

const scopes: Set<Tensor>[] = [];

/** Called by the Tensor constructor. */
export function trackTensor(t: Tensor): void {
  if (scopes.length > 0) scopes[scopes.length - 1].add(t);
}

/** Exempts t from every open scope: it outlives them and its owner disposes it. */
export function keep<T extends Tensor>(t: T): T {
  for (const s of scopes) s.delete(t);
  return t;
}

function collect(value: unknown, into: Set<unknown>, depth = 0): void {
  if (value === null || typeof value !== 'object' || depth > 4) return;
  if (Array.isArray(value)) {
    for (const v of value) collect(v, into, depth + 1);
  } else if (Object.getPrototypeOf(value) === Object.prototype) {
    for (const v of Object.values(value)) collect(v, into, depth + 1);
  } else {
    into.add(value);
  }
}

/** Runs fn (synchronous: an async fn's later tensors would land in whatever scope is open then) in a scope. */
export function tidy<T>(fn: () => T): T {
  const scope = new Set<Tensor>();
  scopes.push(scope);
  let result: T;
  try {
    result = fn();
  } catch (e) {
    scopes.pop();
    for (const t of scope) t.dispose();
    throw e;
  }
  scopes.pop();
  if (result instanceof Promise) {
    for (const t of scope) t.dispose();
    throw new TypeError('tidy: fn must be synchronous (it returned a Promise)');
  }
  const returned = new Set<unknown>();
  collect(result, returned);
  const parent = scopes[scopes.length - 1];
  for (const t of scope) {
    if (!returned.has(t)) t.dispose();
    else parent?.add(t);
  }
  return result;
}
